"""End actors append every final envelope to the end records before they ack it."""

from __future__ import annotations

import pytest

from asya.crew.ends import EndActor
from asya.envelope import END_LIMITS, Reason, decode_envelope, encode_envelope
from asya.errors import TransportError
from asya.message_loop import Settle
from asya.routing import ERROR_END, HAPPY_END, Rejection, plan_rejection
from asya.transport.base import Message
from asya.transport.memory import MemoryTransport
from asya.transport.records import RecordKind
from tests.factories import T0, FakeClock, envelope, rng


class Kept:
    def __init__(self):
        self.envelopes = []

    async def record(self, env):
        self.envelopes.append(env)


class Unconfirmed(MemoryTransport):
    """A broker whose record streams never confirm."""

    def __init__(self):
        super().__init__()
        self.records.closed = True


async def _end(name, transport):
    for queue in (HAPPY_END, ERROR_END):
        await transport.declare(queue)
    return EndActor(name, transport=transport, sink=Kept(), clock=FakeClock(), rng=rng())


def _failed(env):
    return plan_rejection(env, Rejection(Reason.HANDLER_ERROR, "boom"), T0).envelope


async def _bodies(transport, kind):
    return [decode_envelope(r.body, END_LIMITS) async for r in transport.records.read(kind)]


@pytest.mark.parametrize(
    ("name", "kind", "final"),
    [
        (HAPPY_END, RecordKind.RESULTS, envelope("a", payload={"x": 1})),
        (ERROR_END, RecordKind.FAILURES, _failed(envelope("a", payload={"x": 1}))),
    ],
    ids=["happy-end-to-results", "error-end-to-failures"],
)
async def test_an_end_actor_appends_each_final_envelope_to_its_log(name, kind, final):
    transport = MemoryTransport()
    end = await _end(name, transport)

    settles = await end.handle([Message(name, encode_envelope(final, END_LIMITS), 1)])

    assert settles == [Settle.ACK]
    assert await _bodies(transport, kind) == [final]


async def test_a_failure_record_keeps_its_reason_and_route():
    transport = MemoryTransport()
    end = await _end(ERROR_END, transport)
    failed = _failed(envelope("a", ("b", "c")))

    await end.handle([Message(ERROR_END, encode_envelope(failed, END_LIMITS), 1)])

    (kept,) = await _bodies(transport, RecordKind.FAILURES)
    assert (kept.status.reason, kept.route.curr, kept.route.next) == (
        Reason.HANDLER_ERROR,
        "a",
        ("b", "c"),
    )


@pytest.mark.parametrize("name", [HAPPY_END, ERROR_END])
async def test_a_record_that_is_not_confirmed_gives_the_message_back(name):
    transport = Unconfirmed()
    end = await _end(name, transport)
    final = envelope("a") if name == HAPPY_END else _failed(envelope("a"))

    settles = await end.handle([Message(name, encode_envelope(final, END_LIMITS), 1)])

    assert settles == [Settle.REQUEUE]


async def test_an_end_actor_that_cannot_declare_its_log_does_not_start():
    transport = MemoryTransport()
    end = await _end(HAPPY_END, transport)

    async def refuse(kind):
        raise TransportError("no streams here")

    transport.records.declare = refuse

    with pytest.raises(TransportError):
        await end.start()
    assert end.loop.state.value == "starting"
