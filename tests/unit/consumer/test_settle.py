"""Settling: one place acks or requeues; a poison message fails alone; history is kept."""

from __future__ import annotations

import asyncio

from asya import RetryPolicy, actor
from asya.actor import spec_of
from asya.envelope import END_LIMITS, Limits, decode_envelope, encode_envelope
from asya.errors import TransportError
from asya.handler import LocalInvoker
from asya.hooks import Hooks
from asya.message_loop import MessageLoop, OnePhase, Settle
from asya.routing import ERROR_END, HAPPY_END
from asya.transport.memory import MemoryTransport
from tests.factories import FakeClock, Replica, envelope, rng
from tests.unit.consumer.test_chain import Mesh, Recorder


async def test_a_message_that_breaks_its_batch_is_requeued_alone_and_its_batch_mates_are_acked():
    transport = MemoryTransport()
    await transport.declare("a")
    handled: list[bytes] = []
    poison_alone = asyncio.Event()

    async def handle(messages):
        bodies = [m.body for m in messages]
        if b"poison" in bodies:
            if len(bodies) == 1:
                poison_alone.set()
            raise RuntimeError("a bug in the chain")
        handled.extend(bodies)
        return [Settle.ACK] * len(messages)

    for body in [b"g1", b"g2", b"g3", b"poison", b"g4", b"g5", b"g6", b"g7"]:
        await transport.publish("a", body)
    loop = MessageLoop(transport, "a", OnePhase(handle), batch=8, batch_wait_ms=1000)
    await loop.start()
    await asyncio.wait_for(poison_alone.wait(), 5)
    await loop.stop(1)

    assert sorted(handled) == [b"g1", b"g2", b"g3", b"g4", b"g5", b"g6", b"g7"]
    assert (await transport.depth("a")).total == 1


class FlakyBroker(MemoryTransport):
    """Refuses the first publish to `target`, as a broker that lost the channel would."""

    def __init__(self, target: str) -> None:
        super().__init__()
        self._target = target
        self.refused = 0

    async def publish(self, actor, body, *, delay_ms=0):
        if actor == self._target and self.refused == 0:
            self.refused += 1
            raise TransportError("publish was not confirmed")
        await super().publish(actor, body, delay_ms=delay_ms)


async def test_outputs_the_broker_would_not_confirm_send_the_envelope_back_for_redelivery():
    @actor
    def a(doc):
        return doc

    mesh = Mesh(a)
    mesh.transport = FlakyBroker(HAPPY_END)
    async with mesh:
        await mesh.send(envelope("a", id="once"))
        [final] = await mesh.finals(HAPPY_END, 1)

    assert final.id == "once"
    assert mesh.transport.refused == 1
    assert [step[0] for step in mesh.recorder.steps] == ["a"]


async def test_the_errors_of_earlier_attempts_travel_on_after_a_success():
    @actor(retry=RetryPolicy(max_attempts=3, base_delay_ms=1, jitter=0))
    def a(doc, ctx):
        if ctx.attempt == 1:
            raise ConnectionError("first attempt fails")
        return doc

    async with Mesh(a) as mesh:
        await mesh.send(envelope("a"))
        [final] = await mesh.finals(HAPPY_END, 1)

    [earlier] = final.status.retries
    assert (earlier.actor, earlier.attempt, earlier.type) == ("a", 1, "builtins.ConnectionError")
    assert earlier.message == "first attempt fails"
    assert earlier.traceback is None


async def test_a_failure_with_no_error_end_queue_is_parked_not_looped():
    @actor(retry=RetryPolicy(max_attempts=1))
    def a(doc):
        raise ValueError("boom")

    transport = MemoryTransport()
    await transport.declare("a")  # and no error-end
    consumer = _consumer(a, transport, Recorder())
    await consumer.start()
    await transport.publish("a", encode_envelope(envelope("a", id="lonely"), Limits()))
    await asyncio.wait_for(transport.join(), 5)
    await consumer.stop(1)

    [(body, reason)] = transport.parked
    assert decode_envelope(body, END_LIMITS).id == "lonely"
    assert reason == "error-end has no queue"


class ExplodingObserver(Hooks):
    def __init__(self):
        self.calls = 0

    def stepped(self, actor, result, reason, duration_s, outputs):
        self.calls += 1
        raise BrokenPipeError(32, "Broken pipe")


async def test_an_observer_that_fails_does_not_send_a_confirmed_step_round_again():
    @actor
    def a(doc):
        return doc

    transport = MemoryTransport()
    for name in ("a", HAPPY_END, ERROR_END):
        await transport.declare(name)
    observer = ExplodingObserver()
    consumer = _consumer(a, transport, observer)
    await consumer.start()
    await transport.publish("a", encode_envelope(envelope("a"), Limits()))
    happy = await transport.subscribe(HAPPY_END, prefetch=10)
    first = await asyncio.wait_for(happy.get(), 5)
    await happy.ack(first)
    await consumer.stop(1)

    assert observer.calls == 1
    assert (await transport.depth("a")).total == 0
    assert (await transport.depth(HAPPY_END)).total == 0
    await happy.close()


def _consumer(target, transport, observer):
    spec = spec_of(target)
    return Replica(
        spec.config,
        transport=transport,
        invoker=LocalInvoker(spec),
        limits=Limits(),
        clock=FakeClock(),
        rng=rng(),
        hooks=observer,
    )


async def test_a_drain_cut_short_gives_the_calls_in_flight_back_at_once():
    transport = MemoryTransport()
    await transport.declare("a")
    started = asyncio.Event()

    async def handle(messages):
        started.set()
        await asyncio.Event().wait()  # a call whose runtime is gone: it never answers

    await transport.publish("a", b"held")
    loop = MessageLoop(transport, "a", OnePhase(handle))
    await loop.start()
    await asyncio.wait_for(started.wait(), 5)

    draining = asyncio.create_task(loop.stop(3600))
    await asyncio.sleep(0)
    loop.cut_short()
    await asyncio.wait_for(draining, 5)  # not the grace: the call is given up

    assert (await transport.depth("a")).total == 1
