"""The actor chain over the memory transport: every input ends somewhere, with its reason."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from asya import RetryPolicy, actor
from asya.actor import ActorConfig, spec_of
from asya.envelope import Envelope, Limits, Phase, Reason, decode_envelope, encode_envelope
from asya.handler import LocalInvoker
from asya.hooks import Hooks, StepResult
from asya.outcome import Emitted, Failure, Success
from asya.routing import ERROR_END, HAPPY_END
from asya.transport.memory import MemoryTransport
from tests.factories import FakeClock, Replica, envelope, rng


class Recorder(Hooks):
    def __init__(self):
        self.steps = []
        self.reasons = []

    def stepped(self, actor, result, reason, duration_s, outputs):
        self.steps.append((actor, result))
        self.reasons.append(reason)


class Mesh:
    """One consumer per decorated actor, and plain queues for the end actors."""

    def __init__(self, *targets, limits=None):
        self.transport = MemoryTransport()
        self.recorder = Recorder()
        self.clock = FakeClock()
        self.specs = [spec_of(t) for t in targets]
        self.limits = limits or Limits()
        self.consumers = []

    async def __aenter__(self):
        for name in [s.name for s in self.specs] + [HAPPY_END, ERROR_END]:
            await self.transport.declare(name)
        for spec in self.specs:
            consumer = Replica(
                spec.config,
                transport=self.transport,
                invoker=LocalInvoker(spec),
                limits=self.limits,
                clock=self.clock,
                rng=rng(),
                hooks=self.recorder,
            )
            await consumer.start()
            self.consumers.append(consumer)
        return self

    async def __aexit__(self, *exc):
        for consumer in self.consumers:
            await consumer.stop(1)
        await self.transport.aclose()

    async def send(self, env: Envelope | bytes, to: str | None = None):
        body = env if isinstance(env, bytes) else encode_envelope(env, Limits())
        await self.transport.publish(to or env.route.curr, body)

    async def finals(self, name, count):
        subscription = await self.transport.subscribe(name, prefetch=1000)
        found = []
        while len(found) < count:
            message = await asyncio.wait_for(subscription.get(), 5)
            found.append(decode_envelope(message.body, Limits(max_payload_bytes=2**40)))
            await subscription.ack(message)
        await subscription.close()
        return found


async def test_an_envelope_visits_each_actor_of_its_route_and_reaches_happy_end():
    @actor
    def a(doc):
        return {**doc, "a": True}

    @actor
    async def b(doc):
        return {**doc, "b": True}

    async with Mesh(a, b) as mesh:
        await mesh.send(envelope("a", ["b"], payload={"n": 1}))
        [final] = await mesh.finals(HAPPY_END, 1)

    assert final.payload == {"n": 1, "a": True, "b": True}
    assert final.route.prev == ("a", "b")
    assert final.status.phase is Phase.SUCCEEDED


async def test_fan_out_children_each_reach_happy_end():
    @actor
    def split(doc):
        yield from range(3)

    async with Mesh(split) as mesh:
        await mesh.send(envelope("split", id="doc"))
        finals = await mesh.finals(HAPPY_END, 3)

    assert sorted(f.id for f in finals) == ["doc-1", "doc-2", "doc-3"]


async def test_malformed_bytes_reach_error_end_with_the_raw_body_and_the_consumer_keeps_going():
    @actor
    def a(doc):
        return doc

    async with Mesh(a) as mesh:
        await mesh.send(b"{not json", to="a")
        await mesh.send(envelope("a"))
        [bad] = await mesh.finals(ERROR_END, 1)
        [good] = await mesh.finals(HAPPY_END, 1)

    assert bad.status.reason is Reason.MALFORMED_ENVELOPE
    assert bad.payload["body_base64"] == "e25vdCBqc29u"
    assert good.status.phase is Phase.SUCCEEDED


async def test_a_route_naming_an_actor_without_a_queue_ends_in_error_end_as_unknown_actor():
    @actor
    def a(doc):
        return doc

    async with Mesh(a) as mesh:
        await mesh.send(envelope("a", ["translate"]))
        [final] = await mesh.finals(ERROR_END, 1)

    assert final.status.reason is Reason.UNKNOWN_ACTOR
    assert "no actor named 'translate'" in final.status.error.message
    assert mesh.recorder.steps == [("a", StepResult.FAILED)]
    assert mesh.recorder.reasons == ["UnknownActor"]


async def test_a_failing_call_is_retried_with_backoff_then_succeeds_with_attempts_recorded():
    calls = []

    @actor(retry=RetryPolicy(max_attempts=3, base_delay_ms=10, jitter=0))
    def flaky(doc):
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError(f"try {len(calls)}")
        return doc

    async with Mesh(flaky) as mesh:
        await mesh.send(envelope("flaky"))
        [final] = await mesh.finals(HAPPY_END, 1)
        steps = mesh.recorder.steps

    assert len(calls) == 3
    assert final.status.phase is Phase.SUCCEEDED
    assert [r for _, r in steps] == [StepResult.RETRIED, StepResult.RETRIED, StepResult.SUCCEEDED]


async def test_when_retries_run_out_the_envelope_goes_to_error_end_with_every_attempt():
    @actor(retry=RetryPolicy(max_attempts=3, base_delay_ms=1, jitter=0))
    def broken(doc):
        raise ConnectionError("still down")

    async with Mesh(broken) as mesh:
        await mesh.send(envelope("broken"))
        [final] = await mesh.finals(ERROR_END, 1)

    status = final.status
    assert status.reason is Reason.HANDLER_ERROR
    assert (status.attempt, status.max_attempts) == (3, 3)
    assert [e.attempt for e in status.retries] == [1, 2]
    assert status.error.message == "still down"


async def test_a_handler_past_its_timeout_ends_in_error_end_as_timeout():
    @actor(timeout_s=0.05, retry=RetryPolicy(max_attempts=1))
    async def slow(doc):
        await asyncio.sleep(30)

    async with Mesh(slow) as mesh:
        await mesh.send(envelope("slow"))
        [final] = await mesh.finals(ERROR_END, 1)

    assert final.status.reason is Reason.TIMEOUT


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        pytest.param("x" * 500, Reason.PAYLOAD_TOO_LARGE, id="too-large"),
        pytest.param(object(), Reason.INVALID_OUTPUT, id="not-json"),
    ],
)
async def test_an_output_that_cannot_be_sent_goes_to_error_end_with_the_input_kept(output, reason):
    @actor
    def a(doc):
        return output

    async with Mesh(a, limits=Limits(max_payload_bytes=100)) as mesh:
        await mesh.send(envelope("a", payload={"small": 1}))
        [final] = await mesh.finals(ERROR_END, 1)

    assert final.status.reason is reason
    assert final.payload == {"small": 1}
    assert mesh.recorder.steps == [("a", StepResult.FAILED)]  # counted where it failed
    assert mesh.recorder.reasons == [reason.value]


async def test_an_output_json_would_change_is_refused_even_on_its_way_to_error_end():
    @actor
    def a(doc, ctx):
        ctx.route.next = ["not_an_actor"]  # a bad name: the output goes to error-end as it is
        return {"score": float("nan")}

    async with Mesh(a) as mesh:
        await mesh.send(envelope("a", payload={"small": 1}))
        [final] = await mesh.finals(ERROR_END, 1)

    assert final.status.reason is Reason.INVALID_OUTPUT
    assert final.payload == {"small": 1}


async def test_an_envelope_over_the_hop_limit_never_reaches_user_code():
    calls = []

    @actor
    def a(doc):
        calls.append(1)
        return doc

    async with Mesh(a, limits=Limits(hop_limit=3)) as mesh:
        await mesh.send(envelope("a", ["a"] * 10))
        [final] = await mesh.finals(ERROR_END, 1)

    assert final.status.reason is Reason.HOP_LIMIT_EXCEEDED
    assert len(calls) == 3
    assert len(final.route.prev) == 3


async def test_an_expired_envelope_goes_to_error_end_without_calling_the_handler():
    calls = []

    @actor
    def a(doc):
        calls.append(1)
        return doc

    async with Mesh(a) as mesh:
        expired = envelope("a", deadline_at=mesh.clock.now())
        await mesh.send(expired)
        [final] = await mesh.finals(ERROR_END, 1)

    assert final.status.reason is Reason.DEADLINE_EXCEEDED
    assert calls == []


async def test_an_oversized_body_is_kept_whole_at_error_end():
    @actor
    def a(doc):
        return doc

    big = encode_envelope(envelope("a", payload="x" * 70_000), Limits())
    async with Mesh(a, limits=Limits(max_payload_bytes=1000)) as mesh:
        await mesh.send(big, to="a")
        [final] = await mesh.finals(ERROR_END, 1)

    assert final.status.reason is Reason.PAYLOAD_TOO_LARGE
    assert final.payload["body_bytes"] == len(big)


async def test_a_batch_actor_receives_envelopes_together_and_routes_each():
    sizes = []

    @actor(batch=5, batch_wait_ms=200)
    def embed(docs):
        sizes.append(len(docs))
        return [{"v": d["n"]} for d in docs]

    async with Mesh(embed) as mesh:
        for n in range(5):
            await mesh.send(envelope("embed", id=f"e{n}", payload={"n": n}))
        finals = await mesh.finals(HAPPY_END, 5)

    assert sorted(f.payload["v"] for f in finals) == [0, 1, 2, 3, 4]
    assert sizes == [5]


async def test_an_input_whose_processing_crashes_is_requeued_not_lost():
    @actor
    def a(doc):
        return doc

    class CrashingInvoker:
        def __init__(self):
            self.calls = 0

        async def invoke(self, envelopes):
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("invoker bug")
            return await LocalInvoker(spec_of(a)).invoke(envelopes)

        def drain(self):
            return None

        async def aclose(self):
            return None

    transport, consumer = await _one_replica("a", CrashingInvoker())
    await transport.publish("a", encode_envelope(envelope("a"), Limits()))
    subscription = await transport.subscribe(HAPPY_END, prefetch=1)
    message = await asyncio.wait_for(subscription.get(), 5)
    await consumer.stop(1)
    await subscription.close()
    await transport.aclose()

    assert msgspec.json.decode(message.body)["id"] == "e1"


async def _one_replica(name, invoker):
    """A started replica of actor `name` calling `invoker`, on a memory transport of its own
    with the end actors' queues."""
    transport = MemoryTransport()
    for queue in (name, HAPPY_END, ERROR_END):
        await transport.declare(queue)
    consumer = Replica(
        ActorConfig(name=name),
        transport=transport,
        invoker=invoker,
        limits=Limits(),
        clock=FakeClock(),
        rng=rng(),
        hooks=Recorder(),
    )
    await consumer.start()
    return transport, consumer


class Answering:
    """An invoker standing in for a worker process: answers every call with `outcome`."""

    def __init__(self, outcome):
        self.outcome = outcome

    async def invoke(self, envelopes):
        return [self.outcome for _ in envelopes]

    def drain(self):
        pass

    async def aclose(self):
        pass


async def _step_through(outcome):
    """The finals of one envelope sent to an actor whose worker answers `outcome`, once the
    actor has stopped (its message settled): those at happy-end, those at error-end."""
    transport, consumer = await _one_replica("w", Answering(outcome))
    mesh = Mesh()
    mesh.transport = transport
    try:
        await mesh.send(envelope("w", payload={"in": 1}))
        done = await mesh.finals(HAPPY_END, 1)
    finally:
        await consumer.stop(1)  # every output of the step is published before it is acked
    assert (await transport.depth("w")).unacked == 0
    failed = await mesh.finals(ERROR_END, (await transport.depth(ERROR_END)).ready)
    return done, failed


def _partly_sent(partial):
    """What a worker answers when some of its outputs cannot be sent."""
    return Failure(
        reason=Reason.INVALID_OUTPUT,
        type="InvalidOutput",
        message="output of 'w' cannot be sent: (the first problem)",
        retryable=False,
        partial=partial,
    )


async def test_an_output_a_worker_could_not_send_fails_alone_and_its_siblings_go_on():
    kept, lost = Emitted(payload={"n": 1}, next=()), Emitted(payload=None, next=())
    partial = Success(outputs=(kept, lost), fan_out=True, unsendable={1: "payload.x is {1}"})

    [done], [failed] = await _step_through(_partly_sent(partial))

    assert (done.id.rsplit("-")[-1], done.payload) == ("1", {"n": 1})
    assert (failed.id.rsplit("-")[-1], failed.payload) == ("2", {"in": 1})
    assert failed.status.reason is Reason.INVALID_OUTPUT
    assert failed.status.error.message == "output of 'w' cannot be sent: payload.x is {1}"


async def test_a_worker_naming_an_output_it_did_not_return_is_ignored_not_obeyed():
    partial = Success(
        outputs=(Emitted(payload={"n": 1}, next=()),), unsendable={5: "bogus", -1: "bogus"}
    )

    [done], failed = await _step_through(_partly_sent(partial))

    assert done.payload == {"n": 1}
    assert failed == []
