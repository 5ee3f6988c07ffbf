"""The supervisor's side of a connection forwards calls as it read them: the envelopes reach
its invoker as the msgpack the sidecar sent, and the outcomes go back as the worker wrote them."""

from __future__ import annotations

import asyncio
import socket

import msgspec

from asya.actor import ActorConfig
from asya.envelope import Limits, Reason
from asya.outcome import Failure, Success
from asya.runtime.connection import ForwardingConnection
from asya.runtime.frames import (
    Call,
    FrameReader,
    RawResult,
    Result,
    encode_frame,
    encode_outcome,
    frame_bounds,
)
from tests.factories import envelope


class Recorder:
    """A raw invoker that keeps what it was given and answers prepared outcomes."""

    def __init__(self, outcomes: list[msgspec.Raw]) -> None:
        self.outcomes = outcomes
        self.seen: list[list[bytes]] = []

    async def invoke(self, envelopes):
        raise AssertionError("a forwarding connection must not decode the call")

    async def invoke_raw(self, envelopes: list[msgspec.Raw]) -> list[msgspec.Raw]:
        self.seen.append([bytes(e) for e in envelopes])
        return self.outcomes

    def drain(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


async def test_a_call_reaches_the_invoker_as_sent_and_its_outcomes_come_back_as_written():
    envelopes = [envelope("a", id="e1", payload={"x": [1, 2.5, "é"]}), envelope("a", id="e2")]
    answers = [
        encode_outcome(Success(outputs=[])),
        encode_outcome(
            Failure(reason=Reason.HANDLER_ERROR, type="ValueError", message="no", retryable=True)
        ),
    ]
    invoker = Recorder(answers)
    ours, theirs = socket.socketpair()
    server_reader, server_writer = await asyncio.open_unix_connection(sock=ours)
    reader, writer = await asyncio.open_unix_connection(sock=theirs)
    bounds = frame_bounds(Limits(), None)
    connection = ForwardingConnection(
        server_reader, server_writer, invoker, ActorConfig(name="a"), 1, bounds
    )
    serving = asyncio.create_task(connection.serve())

    writer.write(encode_frame(Call(7, envelopes)))
    await writer.drain()
    answer = await asyncio.wait_for(FrameReader(reader).read(bounds.result_bytes), 10)
    writer.close()
    await serving
    await connection.close()
    await writer.wait_closed()

    assert invoker.seen == [[msgspec.msgpack.encode(e) for e in envelopes]]
    assert isinstance(answer, Result)
    assert answer.id == 7
    assert [encode_outcome(o) for o in answer.outcomes] == answers
    assert encode_frame(RawResult(7, answers)) == encode_frame(answer)
