"""The frames' own contract: the actor's options cross the socket whole, and a peer speaking
another protocol version is refused with a message saying what to do."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec
import pytest

from asya import RetryPolicy, actor
from asya.actor import ActorConfig, spec_of
from asya.envelope import Limits
from asya.errors import RuntimeProtocolError
from asya.runtime.client import RuntimeClient
from asya.runtime.frames import (
    HANDSHAKE_FRAME_BYTES,
    PROTOCOL,
    FrameReader,
    Ping,
    Pong,
    encode_frame,
    frame_bounds,
)


def test_a_pong_carries_every_option_of_the_actor_as_declared():
    @actor(
        timeout_s=7,
        concurrency=3,
        batch=8,
        batch_wait_ms=25,
        retry=RetryPolicy(max_attempts=5, base_delay_ms=50, factor=3.0, jitter=0.0),
    )
    def scored(docs):
        return docs

    spec = spec_of(scored)
    assert spec is not None
    pong = Pong(1, spec.config, 3, frame_bounds(Limits(), 8), PROTOCOL)

    decoded = msgspec.msgpack.decode(encode_frame(pong)[4:], type=Pong)

    assert decoded.actor == spec.config
    assert (
        decoded.actor.retry
        == RetryPolicy(max_attempts=5, base_delay_ms=50, factor=3.0, jitter=0.0).schedule
    )


async def refusal(path: str, pong: Callable[[int], bytes]) -> RuntimeProtocolError:
    """What a client connecting to a runtime that answers its Ping with `pong(id)` (a whole
    frame) raises; the stand-in runtime is gone when this returns."""
    served = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frame = await FrameReader(reader).read(HANDSHAKE_FRAME_BYTES)
        assert isinstance(frame, Ping)
        writer.write(pong(frame.id))
        await writer.drain()
        await reader.read()  # until the client hangs up
        writer.close()
        await writer.wait_closed()
        served.set()

    server = await asyncio.start_unix_server(serve, path=path)
    client = RuntimeClient(path)
    try:
        with pytest.raises(RuntimeProtocolError) as raised:
            await client.connect()
    finally:
        await asyncio.wait_for(served.wait(), 10)
        server.close()
        await server.wait_closed()
    assert not client.connected
    return raised.value


@pytest.mark.parametrize("version", [0, PROTOCOL + 1])
async def test_a_runtime_speaking_another_protocol_is_refused_naming_both(tmp_path, version):
    def pong(call_id: int) -> bytes:
        bounds = frame_bounds(Limits(), None)
        return encode_frame(Pong(call_id, ActorConfig(name="a"), 1, bounds, version))

    error = await refusal(str(tmp_path / "rt.sock"), pong)

    assert f"protocol {version} and this side {PROTOCOL}" in str(error)


async def test_a_runtime_older_than_the_protocol_field_is_refused_too(tmp_path):
    # Its Pong: the actor's options flat (no `retry` Struct), no `protocol`.
    bounds = frame_bounds(Limits(), None)
    legacy = {
        "type": "pong",
        "actor": {
            "name": "a",
            "timeout_s": 300.0,
            "concurrency": 1,
            "batch": None,
            "batch_wait_ms": 10,
            "max_attempts": 3,
            "base_delay_ms": 1000,
            "factor": 2.0,
            "max_delay_ms": 60000,
            "jitter": 0.1,
            "retry_timeouts": True,
        },
        "capacity": 1,
        "bounds": {"call_bytes": bounds.call_bytes, "result_bytes": bounds.result_bytes},
    }

    def pong(call_id: int) -> bytes:
        body = msgspec.msgpack.encode({**legacy, "id": call_id})
        return len(body).to_bytes(4, "big") + body

    error = await refusal(str(tmp_path / "rt.sock"), pong)

    assert f"protocol 0 and this side {PROTOCOL}" in str(error)
