"""The chain's hooks: one object, no-op by default, heard at each point of a step."""

from __future__ import annotations

import asyncio

from asya import actor
from asya.actor import spec_of
from asya.envelope import Limits, encode_envelope
from asya.handler import LocalInvoker
from asya.hooks import NO_HOOKS, NO_TRACE, Hooks, MetricsHooks, StepResult, combined
from asya.metrics import Metrics
from asya.routing import ERROR_END, HAPPY_END
from asya.transport.memory import MemoryTransport
from tests.factories import T0, FakeClock, Replica, envelope, rng


class Heard(Hooks):
    """Writes down every point it hears of, in order."""

    def __init__(self, log: list[tuple[str, ...]], name: str = "heard") -> None:
        self.log, self.name = log, name

    def taken(self, actor, count, *, redelivered):
        self.log.append((self.name, "taken", str(count)))

    def released(self, actor, count):
        self.log.append((self.name, "released", str(count)))

    def requeued(self, actor):
        self.log.append((self.name, "requeued"))

    def arrived(self, actor, envelope, now):
        self.log.append((self.name, "arrived", envelope.id))
        return NO_TRACE

    def publishing(self, actor, delta):
        self.log.append((self.name, "publishing", str(delta)))

    def stepped(self, actor, result, reason, duration_s, outputs):
        self.log.append((self.name, "stepped", result.value, str(outputs)))


class Failing(Hooks):
    def stepped(self, actor, result, reason, duration_s, outputs):
        raise RuntimeError("a broken observer")


class Tracer(Hooks):
    def __init__(self, trace) -> None:
        self.trace = trace

    def arrived(self, actor, envelope, now):
        return self.trace


def test_no_hooks_make_the_no_op_hooks_and_one_hook_is_used_as_it_is():
    only = Heard([])

    assert combined() is NO_HOOKS
    assert combined(None, NO_HOOKS) is NO_HOOKS
    assert combined(only) is only
    assert isinstance(combined(metrics=Metrics()), MetricsHooks)


def test_the_default_hooks_trace_nothing_and_change_no_envelope():
    sent = envelope("a")
    trace = NO_HOOKS.arrived("a", sent, T0)

    assert trace is NO_TRACE
    assert not trace.is_recording
    assert trace.carried_by(sent) is sent
    assert trace.stamped(sent, T0) is sent


def test_several_hooks_each_hear_every_point_in_order_and_a_failing_one_keeps_none_from_it():
    log: list[tuple[str, ...]] = []
    hooks = combined(Heard(log, "first"), Failing(), Heard(log, "second"))

    hooks.taken("a", 2, redelivered=0)
    hooks.stepped("a", StepResult.SUCCEEDED, "", 0.1, 1)

    assert log == [
        ("first", "taken", "2"),
        ("second", "taken", "2"),
        ("first", "stepped", "succeeded", "1"),
        ("second", "stepped", "succeeded", "1"),
    ]


def test_the_trace_of_several_hooks_is_the_one_a_hook_made():
    class Made:
        is_recording = True

    made = Made()
    hooks = combined(Heard([]), Tracer(made), Heard([]))

    assert hooks.arrived("a", envelope("a"), T0) is made


async def test_a_step_is_heard_by_the_loop_and_the_consumer_through_one_hooks_object():
    @actor
    def a(doc):
        return doc

    spec = spec_of(a)
    transport = MemoryTransport()
    for name in ("a", HAPPY_END, ERROR_END):
        await transport.declare(name)
    log: list[tuple[str, ...]] = []
    replica = Replica(
        spec.config,
        transport=transport,
        invoker=LocalInvoker(spec),
        limits=Limits(),
        clock=FakeClock(),
        rng=rng(),
        hooks=Heard(log),
    )
    await replica.start()
    await transport.publish("a", encode_envelope(envelope("a", id="e1"), Limits()))
    happy = await transport.subscribe(HAPPY_END, prefetch=1)
    await asyncio.wait_for(happy.get(), 5)
    await replica.stop(5)  # lets the step's settle finish
    await happy.close()
    await transport.aclose()

    assert log == [
        ("heard", "taken", "1"),
        ("heard", "arrived", "e1"),
        ("heard", "publishing", "1"),
        ("heard", "publishing", "-1"),
        ("heard", "stepped", "succeeded", "1"),
        ("heard", "released", "1"),
    ]
