"""The runtime wire protocol: length-prefixed msgpack frames carrying tagged messages.

A frame is a 4-byte big-endian length and a msgspec-msgpack body. Every message carries a
request id, so one persistent connection carries many calls at once and answers may come back
in any order. The same protocol is spoken on the runtime's Unix socket (sidecar <-> runtime)
and on the socket pair between the runtime and each of its worker processes.

    Call   (id, envelopes)         -> Result (id, outcomes)   one outcome per envelope
    Ping   (id)                    -> Pong   (id, actor, capacity)  health, and what the actor
                                                              is and how much it takes
    Fault  (id, message)           a request that cannot be answered, or a worker that
                                   failed to start (id 0)
"""

from __future__ import annotations

import asyncio
import struct
from typing import Final

import msgspec

from asya.actor import ActorSpec
from asya.envelope import Envelope
from asya.errors import RuntimeProtocolError
from asya.outcome import Outcome

MAX_FRAME_BYTES: Final = 256 * 1024 * 1024
"""Largest frame accepted: far above any envelope the payload limit lets through."""

_HEADER: Final = struct.Struct(">I")


class ActorInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a runtime tells its peer about the actor it serves (from `@actor`)."""

    name: str
    timeout_s: float
    concurrency: int
    batch: int | None
    batch_wait_ms: int
    max_attempts: int
    base_delay_ms: int
    factor: float
    max_delay_ms: int
    jitter: float
    retry_timeouts: bool


def actor_info(spec: ActorSpec) -> ActorInfo:
    """The ActorInfo of a decorated actor."""
    retry = spec.retry
    return ActorInfo(
        name=spec.name,
        timeout_s=spec.timeout_s,
        concurrency=spec.concurrency,
        batch=spec.batch,
        batch_wait_ms=spec.batch_wait_ms,
        max_attempts=retry.max_attempts,
        base_delay_ms=retry.base_delay_ms,
        factor=retry.factor,
        max_delay_ms=retry.max_delay_ms,
        jitter=retry.jitter,
        retry_timeouts=retry.retry_timeouts,
    )


class Call(msgspec.Struct, frozen=True, tag="call"):
    id: int
    envelopes: list[Envelope]


class Result(msgspec.Struct, frozen=True, tag="result"):
    id: int
    outcomes: list[Outcome]


class Ping(msgspec.Struct, frozen=True, tag="ping"):
    id: int


class Pong(msgspec.Struct, frozen=True, tag="pong"):
    id: int
    actor: ActorInfo
    capacity: int
    """Calls this peer takes at once."""


class Fault(msgspec.Struct, frozen=True, tag="fault"):
    id: int
    message: str


Frame = Call | Result | Ping | Pong | Fault

_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[Frame] = msgspec.msgpack.Decoder(Frame)


def encode_frame(frame: Frame) -> bytes:
    """Length prefix and body of one frame."""
    body = _encoder.encode(frame)
    return _HEADER.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> Frame | None:
    """The next frame, or None at a clean end of stream.

    Raises:
        RuntimeProtocolError: a frame that is too large, cut short, or not one of ours.
    """
    try:
        header = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise RuntimeProtocolError("stream ended inside a frame header") from exc
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME_BYTES:
        raise RuntimeProtocolError(f"frame of {size} bytes is over {MAX_FRAME_BYTES}")
    try:
        body = await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise RuntimeProtocolError(f"stream ended inside a {size}-byte frame") from exc
    try:
        return _decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise RuntimeProtocolError(f"not a runtime frame: {exc}") from exc
