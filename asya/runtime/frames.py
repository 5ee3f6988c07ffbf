"""The runtime wire protocol: length-prefixed msgpack frames carrying tagged messages.

A frame is a 4-byte big-endian length and a msgspec-msgpack body. Every message carries a
request id, so one persistent connection carries many calls at once and answers may come back
in any order. The same protocol is spoken on the runtime's Unix socket (sidecar <-> runtime)
and on the socket pair between the runtime and each of its worker processes.

    Call   (id, envelopes)         -> Result (id, outcomes)   one outcome per envelope
    Ping   (id)                    -> Pong   (id, actor, capacity, bounds)  health, what the
                                                              actor is, how much it takes
    Fault  (id, message)           a request that cannot be answered, or a worker that
                                   failed to start (id 0)
    Drain  (id)                    no answer: calls queued and not started are answered
                                   `NotStarted`; from a worker: it is leaving; from the
                                   runtime to a sidecar calling its workers: it is stopping
    Workers (id 0, paths)          no answer: the runtime's workers now listen on `paths`
                                   (sent to a sidecar whose Ping asked for `direct` calls)
    Retire (id 0, worker)          no answer: kill the worker on that path and replace it
                                   (a sidecar's call to it ran past its timeout)

A serving peer takes more calls than it runs at once (`capacity`): the ones past it wait, in
the order they came, so that the next call is already there when one ends (pipelining). A
Drain turns the waiting ones away untouched.

Direct calls: a sidecar whose Ping says `direct` gets, in the runtime's Pong, the socket path
of each worker process, and calls the workers there itself, with the same frames: a call
crosses two processes instead of three, the runtime's supervisor out of its way. The
supervisor keeps what needs it: it starts and replaces workers (each change is a `Workers`
frame), kills the one a sidecar `Retire`s, and says when it stops (a Drain). A runtime whose
Pong is not `direct` (older, or one whose workers have no sockets) is called through its own
socket, as before; an older one ignores the Ping's `direct`, and an older sidecar the Pong's
new fields. A sidecar that cannot reach the workers' sockets pings again without `direct`,
and calls through the runtime's socket from then on.

Frames are bounded (`FrameBounds`): a Call by the envelopes it may carry, a Result by what one
call may emit. The serving side states its bounds in its Pong and keeps its own promise (a
Result over the bound is answered as `PayloadTooLarge` failures instead), and the calling side
never sends a Call over the bound (its envelopes fail as `PayloadTooLarge` instead): a frame
over a bound is never the normal path, so closing the connection on one cannot make a call
loop. A frame that has started must arrive whole within `FRAME_TIMEOUT_S`; the wait for the
first byte of the next one is unbounded, as a persistent connection may idle.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Sequence
from typing import Final, TypeVar

import msgspec

from asya.actor import ActorConfig
from asya.envelope import ENVELOPE_OVERHEAD_BYTES, Envelope, Limits
from asya.errors import RuntimeProtocolError
from asya.outcome import Outcome

MSGPACK_EXPANSION: Final = 3
"""How much larger than its JSON a payload may be in msgpack: a list of short floats (`0.5,`,
4 bytes in JSON) takes 9 bytes each, 2.25 times as much; nothing takes more."""

FRAME_OVERHEAD_BYTES: Final = 64 * 1024
"""Room for a frame's own fields (tag, id, a Pong's actor, a Failure's traceback)."""

FAN_OUT_ENVELOPES: Final = 16
"""Full-size envelopes a Result may carry for a one-envelope call: a generator may yield more
children than that as long as they are smaller (1,000 chunks of 64 KiB fit). Past it, the call
fails as `PayloadTooLarge`: large data travels as references."""

HANDSHAKE_FRAME_BYTES: Final = FRAME_OVERHEAD_BYTES
"""Bound for the frames read before the peer's Pong says more: a Ping, a Pong, a Fault."""

FRAME_TIMEOUT_S: Final = 30.0
"""Longest a started frame may take to arrive whole (a stalled peer, not a slow socket)."""

PROTOCOL: Final = 3
"""Version of the frames below, named in every Pong. A sidecar also serves runtimes of the
version before; what differs between versions is written in `asya.runtime.protocols` alone."""

_HEADER: Final = struct.Struct(">I")

log = logging.getLogger(__name__)


class FrameBounds(msgspec.Struct, frozen=True, kw_only=True):
    """Largest frames a serving peer reads (`call_bytes`) and sends (`result_bytes`)."""

    call_bytes: int
    result_bytes: int


def frame_bounds(limits: Limits, batch: int | None) -> FrameBounds:
    """The bounds for an actor taking `batch` envelopes per call (None: one) under `limits`.

    One envelope is its payload (in msgpack, see MSGPACK_EXPANSION) plus its own fields. A
    Call carries up to `batch` of them; a Result, one output per input for a batch actor or
    up to FAN_OUT_ENVELOPES' worth of children for a generator (batch actors cannot be
    generators, so the larger of the two covers both).
    """
    envelope = MSGPACK_EXPANSION * limits.max_payload_bytes + ENVELOPE_OVERHEAD_BYTES
    calls = batch or 1
    return FrameBounds(
        call_bytes=calls * envelope + FRAME_OVERHEAD_BYTES,
        result_bytes=max(calls, FAN_OUT_ENVELOPES) * envelope + FRAME_OVERHEAD_BYTES,
    )


class Call(msgspec.Struct, frozen=True, tag="call"):
    id: int
    envelopes: list[Envelope]


class Result(msgspec.Struct, frozen=True, tag="result"):
    id: int
    outcomes: list[Outcome]


class Ping(msgspec.Struct, frozen=True, tag="ping"):
    id: int
    direct: bool = False
    """The caller calls the workers on their own sockets if the runtime names them (in its
    Pong, then in `Workers` frames); see the module docstring."""


class Pong(msgspec.Struct, frozen=True, tag="pong"):
    id: int
    actor: ActorConfig
    """The actor served, with the options the sidecar's message chain runs it with."""
    capacity: int
    """Calls this peer takes at once."""
    bounds: FrameBounds
    """The largest Call this peer reads and the largest Result it sends."""
    protocol: int = 0
    """The frame protocol this peer speaks (`PROTOCOL`); 0 from one older than the field."""
    direct: bool = False
    """To a Ping that asked for `direct` calls: this runtime serves them. Its workers listen
    on `worker_paths` now (none while they are all being replaced), and each change comes in a
    `Workers` frame. False from a worker, an older runtime, or one whose workers have no
    sockets of their own: call it here."""
    worker_paths: list[str] = []
    kill_grace_s: float = 2.0
    """With `direct`: how long past its timeout a call runs before its caller retires its
    worker (`ASYA_KILL_GRACE_S`)."""


class Fault(msgspec.Struct, frozen=True, tag="fault"):
    id: int
    message: str


class Drain(msgspec.Struct, frozen=True, tag="drain"):
    """Start none of the calls held now that have not started: each is answered `NotStarted` at
    once. Calls already running finish; later calls are served. Sent by a peer that stops (a
    sidecar draining, the runtime on SIGTERM); a worker sends it to the runtime when it is
    leaving (after a timed-out call), and from then on turns every call away."""

    id: int


class RawCall(msgspec.Struct, frozen=True, tag="call"):
    """A Call as the runtime's supervisor reads it: each envelope left as the msgpack it came
    in, forwarded to a worker without being decoded or encoded again."""

    id: int
    envelopes: list[msgspec.Raw]


class PackedCall(msgspec.Struct, frozen=True, tag="call"):
    """A Call whose envelopes were encoded before its id was known (`pack_envelopes`): the
    same bytes on the wire, the envelopes encoded once however many workers it is sent to."""

    id: int
    envelopes: msgspec.Raw


class RawResult(msgspec.Struct, frozen=True, tag="result"):
    """A Result as the supervisor reads it from a worker: each outcome left encoded."""

    id: int
    outcomes: list[msgspec.Raw]


class Workers(msgspec.Struct, frozen=True, tag="workers"):
    """From the runtime to a sidecar that calls its workers directly: where they listen now
    (sent whenever one is replaced). A worker not named any more is gone or going."""

    id: int
    paths: list[str]


class Retire(msgspec.Struct, frozen=True, tag="retire"):
    """From a sidecar calling the workers directly to the runtime: a call to the worker at
    `worker` ran past its timeout; kill that worker and start another."""

    id: int
    worker: str


Frame = Call | Result | Ping | Pong | Fault | Drain | Workers | Retire
"""The frames as read (a `PackedCall` is only ever written: it reads as a Call)."""
RawFrame = RawCall | RawResult | Ping | Pong | Fault | Drain | Workers | Retire
"""The same frames, as the supervisor reads them (same bytes on the wire)."""

_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[Frame] = msgspec.msgpack.Decoder(Frame)
_raw_decoder: msgspec.msgpack.Decoder[RawFrame] = msgspec.msgpack.Decoder(RawFrame)
_outcome_decoder: msgspec.msgpack.Decoder[Outcome] = msgspec.msgpack.Decoder(Outcome)


CALL_FRAME_BYTES: Final = 64
"""At least what a Call frame takes beside its envelopes (length, tag, id)."""


def pack_envelopes(envelopes: Sequence[Envelope]) -> msgspec.Raw:
    """`envelopes` as a `PackedCall` carries them."""
    return msgspec.Raw(_encoder.encode(envelopes))


def encode_outcome(outcome: Outcome) -> msgspec.Raw:
    """One outcome as a RawResult carries it."""
    return msgspec.Raw(_encoder.encode(outcome))


def decode_outcome(raw: msgspec.Raw) -> Outcome:
    """One outcome of a RawResult.

    Raises:
        RuntimeProtocolError: it is not an outcome.
    """
    try:
        return _outcome_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise RuntimeProtocolError(f"not an outcome: {exc}") from exc


class FrameWriter:
    """Writes frames to one stream; the frames sent in one event loop iteration go out as one
    write at its end: one system call, and one wake-up of the peer, for a burst of calls or
    results, as when several deliveries arrive in one read. Order is kept."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._queued: list[bytes] = []
        self._flush_handle: asyncio.Handle | None = None

    def send(self, data: bytes) -> None:
        """Queue `data` (whole frames) to be written at the end of this iteration."""
        self._queued.append(data)
        if self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_soon(self._flush)

    async def drain(self) -> None:
        """Wait while the stream's buffer is full (the peer reads slower than we write).

        Raises:
            ConnectionError: the connection is lost.
        """
        await self._writer.drain()

    def close(self) -> None:
        """Write what is queued, then close the stream."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush()
        self._writer.close()

    def _flush(self) -> None:
        self._flush_handle = None
        queued, self._queued = self._queued, []
        if not queued or self._writer.is_closing():
            return  # the peer's reader sees the connection end and fails what waits on it
        try:
            self._writer.write(queued[0] if len(queued) == 1 else b"".join(queued))
        except (ConnectionError, RuntimeError):
            # Lost mid-iteration: as above, the reading side fails what waits on it.
            log.debug("frames not written: the connection is gone")


def encode_frame(frame: Frame | RawFrame | PackedCall) -> bytes:
    """Length prefix and body of one frame."""
    body = _encoder.encode(frame)
    return _HEADER.pack(len(body)) + body


_CHUNK_BYTES: Final = 64 * 1024
"""Most bytes taken from the stream at once: a burst of small frames is one read."""


class FrameReader:
    """The frames of one stream, in order, read a burst at a time.

    One read takes whatever the stream holds (several frames, or part of one), and frames are
    cut from that buffer: a peer that writes frames in bursts costs one read per burst, not
    three reads and a timer per frame. Only a frame that has started and is not whole yet is
    timed (`timeout_s` from its first byte); the wait for the next frame is unbounded.
    """

    __slots__ = ("_buffer", "_reader", "_started", "_timeout_s")

    def __init__(self, reader: asyncio.StreamReader, *, timeout_s: float = FRAME_TIMEOUT_S) -> None:
        self._reader = reader
        self._timeout_s = timeout_s
        self._buffer = bytearray()
        self._started = 0.0
        """Loop time the frame at the head of the buffer started to arrive."""

    async def read(self, max_bytes: int) -> Frame | None:
        """The next frame, or None at a clean end of stream.

        Raises:
            RuntimeProtocolError: a frame over `max_bytes`, cut short, stalled past the
                timeout, or not one of ours.
        """
        return _decoded(await self._body(max_bytes), _decoder)

    async def read_raw(self, max_bytes: int) -> RawFrame | None:
        """As `read`, with a Call's envelopes and a Result's outcomes left encoded.

        Raises:
            RuntimeProtocolError: as `read`.
        """
        return _decoded(await self._body(max_bytes), _raw_decoder)

    async def _body(self, max_bytes: int) -> bytes | None:
        buffer = self._buffer
        while True:
            if len(buffer) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(buffer)
                if size > max_bytes:
                    raise RuntimeProtocolError(
                        f"frame of {size} bytes is over the bound of {max_bytes}"
                    )
                end = _HEADER.size + size
                if len(buffer) >= end:
                    with memoryview(buffer) as view:
                        body = bytes(view[_HEADER.size : end])
                    del buffer[:end]
                    if buffer:  # the next frame has started: it is timed from now
                        self._started = asyncio.get_running_loop().time()
                    return body
            chunk = await self._more(partial=bool(buffer))
            if not chunk:
                if buffer:
                    raise RuntimeProtocolError("stream ended inside a frame")
                return None
            if not buffer:
                self._started = asyncio.get_running_loop().time()
            buffer += chunk

    async def _more(self, *, partial: bool) -> bytes:
        if not partial:  # between frames: a persistent connection may idle, unbounded
            return await self._reader.read(_CHUNK_BYTES)
        try:
            async with asyncio.timeout_at(self._started + self._timeout_s):
                return await self._reader.read(_CHUNK_BYTES)
        except TimeoutError as exc:
            raise RuntimeProtocolError(
                f"a frame started but did not arrive whole within {self._timeout_s:g} s"
            ) from exc


_F = TypeVar("_F")


def _decoded(body: bytes | None, decoder: msgspec.msgpack.Decoder[_F]) -> _F | None:
    if body is None:
        return None
    try:
        return decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise RuntimeProtocolError(f"not a runtime frame: {exc}") from exc
