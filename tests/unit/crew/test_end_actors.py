"""End actors record every arrival exactly once, with a reason for every way into error-end."""

from __future__ import annotations

import asyncio

import pytest

from asya.crew.ends import EndActor
from asya.envelope import END_LIMITS, Phase, Reason, decode_envelope, encode_envelope
from asya.message_loop import Settle
from asya.routing import ERROR_END, HAPPY_END, Rejection, plan_rejection
from asya.transport.base import Death, DeathReason, Message
from asya.transport.memory import MemoryTransport
from tests.factories import T0, FakeClock, envelope, rng


class Kept:
    def __init__(self, fail_with: BaseException | None = None):
        self.envelopes = []
        self.fail_with = fail_with

    async def record(self, env):
        if self.fail_with is not None:
            raise self.fail_with
        self.envelopes.append(env)


async def _end(name, sink, transport=None):
    transport = transport or MemoryTransport()
    for queue in (HAPPY_END, ERROR_END):
        await transport.declare(queue)
    return transport, EndActor(name, transport=transport, sink=sink, clock=FakeClock(), rng=rng())


def _failed(env):
    return plan_rejection(env, Rejection(Reason.HANDLER_ERROR, "boom"), T0).envelope


def _message(body, *, death=None):
    return Message(ERROR_END, body, 1, death=death)


@pytest.mark.parametrize(
    ("death", "reason"),
    [
        (DeathReason.DELIVERY_LIMIT, Reason.DELIVERY_LIMIT_EXCEEDED),
        (DeathReason.EXPIRED, Reason.EXPIRED),
        (DeathReason.MAXLEN, Reason.QUEUE_OVERFLOW),
        (DeathReason.REJECTED, Reason.REJECTED),
    ],
    ids=["delivery-limit", "expired", "maxlen", "rejected"],
)
async def test_error_end_names_the_brokers_reason_for_a_dead_lettered_envelope(death, reason):
    kept = Kept()
    _, end = await _end(ERROR_END, kept)
    body = encode_envelope(envelope("a"), END_LIMITS)

    settles = await end.handle([_message(body, death=Death(death, "asya-ns-a"))])

    assert settles == [Settle.ACK]
    [record] = kept.envelopes
    assert record.status.reason is reason
    assert record.status.phase is Phase.FAILED
    assert "asya-ns-a" in record.status.error.message


async def test_error_end_records_an_envelope_published_without_a_failure_as_no_failure_recorded():
    kept = Kept()
    _, end = await _end(ERROR_END, kept)

    await end.handle([_message(encode_envelope(envelope("a"), END_LIMITS))])

    assert kept.envelopes[0].status.reason is Reason.NO_FAILURE_RECORDED


async def test_error_end_keeps_the_reason_an_actor_decided():
    kept = Kept()
    _, end = await _end(ERROR_END, kept)

    await end.handle([_message(encode_envelope(_failed(envelope("a")), END_LIMITS))])

    assert kept.envelopes[0].status.reason is Reason.HANDLER_ERROR


async def test_a_sink_that_fails_parks_the_message_and_acks_it():
    kept = Kept(fail_with=BrokenPipeError(32, "Broken pipe"))
    transport, end = await _end(HAPPY_END, kept)
    body = encode_envelope(envelope(HAPPY_END), END_LIMITS)

    settles = await end.handle([Message(HAPPY_END, body, 1)])

    assert settles == [Settle.ACK]
    assert transport.parked == [
        (body, "happy-end could not record it: BrokenPipeError(32, 'Broken pipe')")
    ]


async def test_a_sink_failure_with_nowhere_to_park_gives_the_message_back():
    kept = Kept(fail_with=OSError("disk full"))
    transport, end = await _end(HAPPY_END, kept)
    await transport.aclose()

    settles = await end.handle([Message(HAPPY_END, b"{}", 1)])

    assert settles == [Settle.REQUEUE]


async def test_bytes_that_are_not_an_envelope_at_happy_end_are_recorded_once_at_error_end():
    kept = Kept()
    transport, end = await _end(HAPPY_END, kept)
    subscription = await transport.subscribe(ERROR_END, prefetch=10)

    settles = await end.handle([Message(HAPPY_END, b"\xffgarbage", 1)])

    forwarded = decode_envelope((await subscription.get()).body, END_LIMITS)
    assert settles == [Settle.ACK]
    assert kept.envelopes == []
    assert forwarded.status.reason is Reason.MALFORMED_ENVELOPE
    assert forwarded.payload["body_bytes"] == 8
    await subscription.close()


@pytest.mark.parametrize(
    "reply_to",
    [
        "asya-local-happy-end",
        "asya-local-a",
        "asya-other.reply." + "0" * 32,
        "asya-local.reply.short",
        "x" * 300,
        "asya-local.reply." + "0" * 32 + "\n",
    ],
    ids=[
        "happy-end-own-queue",
        "an-actor-queue",
        "other-namespace",
        "bad-token",
        "300-chars",
        "newline",
    ],
)
async def test_a_reply_to_that_is_not_a_declared_reply_queue_is_refused_and_recorded_once(reply_to):
    kept = Kept()
    transport, end = await _end(HAPPY_END, kept)
    await transport.declare("a")
    body = encode_envelope(envelope(HAPPY_END, headers={"reply_to": reply_to}), END_LIMITS)

    settles = await end.handle([Message(HAPPY_END, body, 1)])

    assert settles == [Settle.ACK]
    assert len(kept.envelopes) == 1
    assert (await transport.depth("a")).total == 0
    assert (await transport.depth(HAPPY_END)).total == 0


async def test_a_reply_queue_a_client_declared_gets_the_recorded_envelope():
    kept = Kept()
    transport, end = await _end(ERROR_END, kept)
    reply = await transport.open_reply_queue()
    dead = encode_envelope(envelope("a", headers={"reply_to": reply.name}), END_LIMITS)

    await end.handle([_message(dead, death=Death(DeathReason.EXPIRED, "asya-local-a"))])

    answered = decode_envelope(await asyncio.wait_for(reply.receive(), 1), END_LIMITS)
    assert answered.status.reason is Reason.EXPIRED
    await reply.close()
