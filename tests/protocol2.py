"""A runtime that speaks frame protocol 2, served by this version's sidecar (its window).

Protocol 2 is what asya's runtime spoke from commit 2be7cd5 to 0909f4a; protocol 3 (eb6c479)
added the Drain frame. A team's image may still hold such a runtime when the cluster's sidecar
is upgraded, and the sidecar serves it (`asya.runtime.protocols`). This module is that runtime
as the sidecar meets it:

- Its frames are defined here as protocol 2 encoded them (the Structs of asya/runtime/frames.py,
  envelope.py, outcome.py and retry.py at 0909f4a), not imported from today's code: a change
  there that a protocol-2 runtime could not read, or that would misread what it sends, fails
  the tests that use this runtime. tests/unit/runtime/test_protocol_window.py holds these
  definitions to bytes that runtime sent (recorded from a checkout of 0909f4a).
- Its behaviour on the socket: every call runs as its own task and waits for a free slot (its
  supervisor waited for a free worker); a frame it does not know, such as a Drain, fails to
  decode and closes the connection, as `Connection.serve` did there.

What it does not copy is the handler machinery: a call is run by today's `LocalInvoker` and its
outcomes are re-encoded as protocol 2's Structs. How a handler behaves is the team's image, not
the protocol.

Why a double and not the old code: running a checkout of 0909f4a needs the git history at test
time (a shallow clone has none) and a second whole asya beside this one; a copy of the old
frames module alone would import today's envelope and outcome types, the very ones that must
not drift unseen.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from datetime import datetime
from typing import Annotated, Any, Final

import msgspec

from asya.actor import ActorSpec
from asya.envelope import Envelope as CurrentEnvelope
from asya.envelope import Limits
from asya.handler import LocalInvoker
from asya.runtime.frames import frame_bounds

VERSION: Final = 2

_ActorName = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=53)]


class Route(msgspec.Struct, frozen=True, kw_only=True):
    prev: tuple[str, ...] = ()
    curr: _ActorName
    next: tuple[_ActorName, ...] = ()


class ErrorInfo(msgspec.Struct, frozen=True, kw_only=True):
    type: str
    message: str
    actor: str
    attempt: int
    traceback: str | None = None


class Status(msgspec.Struct, frozen=True, kw_only=True):
    phase: str = "pending"
    actor: str | None = None
    attempt: Annotated[int, msgspec.Meta(ge=1)] = 1
    max_attempts: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    deadline_at: datetime | None = None
    reason: str | None = None
    error: ErrorInfo | None = None
    retries: tuple[ErrorInfo, ...] = ()


class Branch(msgspec.Struct, frozen=True, kw_only=True):
    index: Annotated[int, msgspec.Meta(ge=1)]
    of: Annotated[int, msgspec.Meta(ge=1)]


class Envelope(msgspec.Struct, frozen=True, kw_only=True):
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    parent_id: str | None = None
    route: Route
    lineage: tuple[Branch, ...] = ()
    headers: dict[str, str] = {}
    status: Status = Status()
    payload: Any = None


class RetrySchedule(msgspec.Struct, frozen=True, kw_only=True):
    max_attempts: int
    base_delay_ms: int
    factor: float
    max_delay_ms: int
    jitter: float
    retry_timeouts: bool


class ActorConfig(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    timeout_s: float = 300.0
    concurrency: int = 1
    batch: int | None = None
    batch_wait_ms: int = 10
    retry: RetrySchedule


class FrameBounds(msgspec.Struct, frozen=True, kw_only=True):
    call_bytes: int
    result_bytes: int


class Emitted(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    payload: Any
    next: tuple[str, ...]
    headers: dict[str, str] = {}


class Success(msgspec.Struct, frozen=True, kw_only=True, tag="ok", tag_field="outcome"):
    outputs: tuple[Emitted, ...] = ()
    fan_out: bool = False


class Failure(msgspec.Struct, frozen=True, kw_only=True, tag="error", tag_field="outcome"):
    reason: str
    type: str
    message: str
    retryable: bool
    traceback: str | None = None


Outcome = Success | Failure


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
    actor: ActorConfig
    capacity: int
    bounds: FrameBounds
    protocol: int = 0


class Fault(msgspec.Struct, frozen=True, tag="fault"):
    id: int
    message: str


Frame = Call | Result | Ping | Pong | Fault

_HEADER: Final = struct.Struct(">I")
_decoder: msgspec.msgpack.Decoder[Frame] = msgspec.msgpack.Decoder(Frame)


def encode_frame(frame: Frame) -> bytes:
    """Length prefix and body, as protocol 2 wrote them."""
    body = msgspec.msgpack.encode(frame)
    return _HEADER.pack(len(body)) + body


def _as(value: object, kind: Any) -> Any:
    """`value` (a Struct of one side) as the same wire form read by `kind` (the other side's)."""
    return msgspec.msgpack.decode(msgspec.msgpack.encode(value), type=kind)


class Protocol2Runtime:
    """Serves `spec` on a Unix socket at `path` as a protocol-2 runtime did (module docstring).

    `version` is what its Pong names (a subclass may name another, to be refused). For the
    tests' eyes: `frames_seen` (each frame's tag, in order, what it could not read
    as `"unreadable"`), `most_calls_held` (the most calls received and not yet answered).
    """

    version: int = VERSION

    def __init__(self, spec: ActorSpec, path: str) -> None:
        self.spec = spec
        self.path = path
        self.bounds = frame_bounds(Limits(), spec.batch)
        self.frames_seen: list[str] = []
        self.most_calls_held = 0
        self._held = 0
        self._invoker = LocalInvoker(spec)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Protocol2Runtime:
        await self._invoker.start()
        self._server = await asyncio.start_unix_server(self._serve, path=self.path)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def pong(self, request_id: int) -> Pong:
        config = self.spec.config
        return Pong(
            request_id,
            _as(config, ActorConfig),
            config.concurrency if self.spec.style.is_async else 1,
            FrameBounds(call_bytes=self.bounds.call_bytes, result_bytes=self.bounds.result_bytes),
            self.version,
        )

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:
                frame = await self._read(reader)
                if isinstance(frame, Ping):
                    writer.write(encode_frame(self.pong(frame.id)))
                elif isinstance(frame, Call):
                    answer = asyncio.create_task(self._answer(frame, writer))
                    self._tasks.add(answer)
                    answer.add_done_callback(self._tasks.discard)
                elif frame is not None:
                    writer.write(encode_frame(Fault(0, f"unexpected {type(frame).__name__}")))
                else:
                    break
        except (msgspec.DecodeError, asyncio.IncompleteReadError, ConnectionError):
            pass  # protocol 2 closed a connection whose peer sent what it could not read
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _read(self, reader: asyncio.StreamReader) -> Frame | None:
        header = await reader.read(_HEADER.size)
        if not header:
            return None
        header += await reader.readexactly(_HEADER.size - len(header))
        (size,) = _HEADER.unpack(header)
        body = await reader.readexactly(size)
        try:
            frame = _decoder.decode(body)
        except msgspec.DecodeError:
            self.frames_seen.append("unreadable")
            raise
        self.frames_seen.append(type(frame).__name__)
        return frame

    async def _answer(self, call: Call, writer: asyncio.StreamWriter) -> None:
        self._held += 1
        self.most_calls_held = max(self.most_calls_held, self._held)
        try:
            envelopes = [_as(e, CurrentEnvelope) for e in call.envelopes]
            outcomes = [_as(o, Outcome) for o in await self._invoker.invoke(envelopes)]
        finally:
            self._held -= 1
        if not writer.is_closing():
            writer.write(encode_frame(Result(call.id, outcomes)))
