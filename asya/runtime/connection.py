"""Serving the frame protocol on one connection: answer calls and pings, in any order.

Used on both hops of the runtime: `ForwardingConnection` on the runtime's Unix socket (peer:
the sidecar) passes calls to the workers still encoded; `WorkerConnection` on the socket pair
from the runtime to each worker process decodes them and runs the handler. Each Call runs as
its own task so many are in flight at once (the invoker starts them in order, as many at once
as it runs; see `asya.handler.Invoker`); answers share one writer. A Drain frame drains the
invoker. A worker's outputs that JSON does not carry faithfully (checked before msgpack, which
would carry sets and dates changed) are left out and named (`Failure.partial`): each fails
alone as `InvalidOutput`, as it does in-process, and
a Result over the bounds this side promised in its Pong becomes
`PayloadTooLarge` failures, instead of breaking the connection. A frame from the peer that is
over the Call bound, stalls mid-way or is not ours closes the connection, with a log line.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from asya.actor import ActorConfig
from asya.envelope import Reason, check_payload
from asya.errors import EnvelopeError, RuntimeProtocolError
from asya.handler import Invoker
from asya.outcome import Failure, Outcome, Success, unsendable_output, worker_crashed
from asya.runtime.frames import (
    FRAME_TIMEOUT_S,
    PROTOCOL,
    Call,
    Drain,
    Fault,
    Frame,
    FrameBounds,
    FrameReader,
    FrameWriter,
    Ping,
    Pong,
    RawCall,
    RawFrame,
    RawResult,
    Result,
    Retire,
    Workers,
    decode_outcome,
    encode_frame,
)

log = logging.getLogger(__name__)


class ForwardedInvoker(Protocol):
    """What a forwarding connection calls: the supervisor's `ProcessInvoker`, which takes
    calls still encoded."""

    async def invoke_raw(self, envelopes: list[msgspec.Raw]) -> list[msgspec.Raw]: ...

    def drain(self) -> None: ...


class DirectHost(Protocol):
    """What a forwarding connection tells of a peer that calls the workers directly: the
    runtime server."""

    def offer(self, peer: ForwardingConnection, wanted: bool) -> tuple[list[str], float] | None:
        """`peer` pinged, asking for direct calls (`wanted`) or not: if it asked and the
        workers may be called directly, where they listen and the kill grace (from now on it
        is told when that changes, and is a direct caller); else None (it calls here)."""
        ...

    def retire(self, worker: str) -> None: ...


class _Drainable(Protocol):
    def drain(self) -> None: ...


_I = TypeVar("_I", bound=_Drainable)


class Connection(abc.ABC, Generic[_I]):
    """One peer's connection; `serve` returns when the peer closes it. Pings and Drains are
    answered here (a Drain drains the invoker); a subclass reads and answers the calls
    (`_read`, `_call`)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        invoker: _I,
        info: ActorConfig,
        capacity: int,
        bounds: FrameBounds,
        *,
        frame_timeout_s: float = FRAME_TIMEOUT_S,
    ) -> None:
        self._frames_in = FrameReader(reader, timeout_s=frame_timeout_s)
        self._writer = writer
        self._invoker = invoker
        self._info = info
        self._capacity = capacity
        self._bounds = bounds
        self._frames = FrameWriter(writer)
        self.in_flight: set[asyncio.Task[None]] = set()

    @abc.abstractmethod
    async def _read(self) -> Frame | RawFrame | None: ...

    @abc.abstractmethod
    def _call(self, frame: Frame | RawFrame) -> Coroutine[Any, Any, None] | None:
        """The answering of `frame` if it is a call; None if it is not."""

    async def serve(self) -> None:
        try:
            while True:
                frame = await self._read()
                if frame is None:
                    return
                self._dispatch(frame)
        except RuntimeProtocolError as exc:
            log.error(
                "closing a connection whose peer broke the protocol", extra={"error": str(exc)}
            )
        except ConnectionError:
            return

    def _dispatch(self, frame: Frame | RawFrame) -> None:
        answer = self._call(frame)
        if answer is not None:
            self._spawn(answer)
        elif isinstance(frame, Ping):
            pong = Pong(frame.id, self._info, self._capacity, self._bounds, PROTOCOL)
            offer = self._offer(frame.direct)
            if offer is not None:
                paths, kill_grace_s = offer
                pong = msgspec.structs.replace(
                    pong, direct=True, worker_paths=paths, kill_grace_s=kill_grace_s
                )
            # Written now, in order: a `Workers` frame sent after it cannot overtake it.
            self._frames.send(encode_frame(pong))
        elif isinstance(frame, Drain):
            self._invoker.drain()
        elif not (isinstance(frame, Retire) and self._retire(frame.worker)):
            self._spawn(
                self.send(Fault(getattr(frame, "id", 0), f"unexpected {type(frame).__name__}"))
            )

    def _offer(self, wanted: bool) -> tuple[list[str], float] | None:
        """To a Ping that asks for direct calls (`wanted`) or not: where the workers listen
        and the kill grace, if they may be called directly (see `DirectHost`)."""
        return None

    def _retire(self, worker: str) -> bool:
        """Handle a `Retire`; False if this side takes none."""
        return False

    def announce(self, paths: list[str]) -> None:
        """Tell the peer where the workers listen now (a `Workers` frame)."""
        self._frames.send(encode_frame(Workers(0, paths)))

    def stopping(self) -> None:
        """Tell the peer the runtime is stopping (a Drain)."""
        self._frames.send(encode_frame(Drain(0)))

    def hang_up(self) -> None:
        """Close the connection: `serve` returns (the peer reconnects)."""
        self._frames.close()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self.in_flight.add(task)
        task.add_done_callback(self.in_flight.discard)

    async def _send_result(self, call_id: int, outcomes: list[Outcome]) -> None:
        try:
            data = encode_frame(Result(call_id, outcomes))
        except (TypeError, ValueError, OverflowError, RecursionError):
            outcomes = [_portable(o) for o in outcomes]
            data = encode_frame(Result(call_id, outcomes))
        if len(data) > self._bounds.result_bytes:
            # The peer reads no more than this (our Pong said so): sending it would only break
            # the connection and have the call sent again, in a loop.
            fitted = _fit(outcomes, len(data), self._bounds.result_bytes)
            data = encode_frame(Result(call_id, fitted))
        await self._write(data)

    async def send(self, frame: Frame | RawFrame) -> None:
        await self._write(encode_frame(frame))

    async def _write(self, data: bytes) -> None:
        self._frames.send(data)
        with contextlib.suppress(ConnectionError):
            await self._frames.drain()

    async def drain(self, grace_s: float) -> None:
        """Wait up to `grace_s` for calls in flight, then cancel the rest."""
        if self.in_flight:
            _, pending = await asyncio.wait(set(self.in_flight), timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def close(self) -> None:
        self._frames.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()


class WorkerConnection(Connection[Invoker]):
    """A worker's connection to the runtime: calls are decoded and run by the worker's
    `LocalInvoker`, and its outcomes checked and fitted to the bounds."""

    async def _read(self) -> Frame | None:
        return await self._frames_in.read(self._bounds.call_bytes)

    def _call(self, frame: Frame | RawFrame) -> Coroutine[Any, Any, None] | None:
        return self._answer(frame) if isinstance(frame, Call) else None

    async def _answer(self, call: Call) -> None:
        outcomes = await self._invoker.invoke(call.envelopes)
        await self._send_result(call.id, [_sendable(o, self._info.name) for o in outcomes])


def _sendable(outcome: Outcome, actor: str) -> Outcome:
    """`outcome`, or, if JSON does not carry some output faithfully, the `InvalidOutput`
    failure of the whole call with the outcome in `partial`: those outputs left out (payload
    None) and named in `unsendable` with why. A sidecar of this version routes the partial
    outcome: that output to `error-end` and the others on, as it does in-process, where it finds
    the same problem when it encodes the output. An older one fails the whole call."""
    if not isinstance(outcome, Success):
        return outcome
    problems: dict[int, str] = {}
    first: EnvelopeError | None = None
    for index, output in enumerate(outcome.outputs):
        try:
            check_payload(output.payload)
        except EnvelopeError as exc:
            problems[index] = str(exc)
            first = first or exc
    if first is None:
        return outcome
    outputs = tuple(
        msgspec.structs.replace(output, payload=None) if index in problems else output
        for index, output in enumerate(outcome.outputs)
    )
    partial = msgspec.structs.replace(outcome, outputs=outputs, unsendable=problems)
    return msgspec.structs.replace(unsendable_output(actor, first), partial=partial)


class ForwardingConnection(Connection[ForwardedInvoker]):
    """The runtime's connection to the sidecar: calls are read and forwarded to the workers
    as msgpack, never decoded here, and their outcomes sent back as the worker wrote them. A
    sidecar that calls the workers directly (`host`) sends none: it pings, and retires."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        invoker: ForwardedInvoker,
        info: ActorConfig,
        capacity: int,
        bounds: FrameBounds,
        *,
        host: DirectHost | None = None,
        frame_timeout_s: float = FRAME_TIMEOUT_S,
    ) -> None:
        super().__init__(
            reader, writer, invoker, info, capacity, bounds, frame_timeout_s=frame_timeout_s
        )
        self._host = host

    def _offer(self, wanted: bool) -> tuple[list[str], float] | None:
        return None if self._host is None else self._host.offer(self, wanted)

    def _retire(self, worker: str) -> bool:
        if self._host is None:
            return False
        self._host.retire(worker)
        return True

    async def _read(self) -> RawFrame | None:
        return await self._frames_in.read_raw(self._bounds.call_bytes)

    def _call(self, frame: Frame | RawFrame) -> Coroutine[Any, Any, None] | None:
        return self._forward(frame) if isinstance(frame, RawCall) else None

    async def _forward(self, call: RawCall) -> None:
        outcomes = await self._invoker.invoke_raw(call.envelopes)
        data = encode_frame(RawResult(call.id, outcomes))
        if len(data) > self._bounds.result_bytes:
            # The worker fitted its Result to the same bound; only the call id differs.
            try:
                decoded = [decode_outcome(o) for o in outcomes]
            except RuntimeProtocolError as exc:
                unreadable = f"the worker's answer could not be read ({exc})"
                decoded = [worker_crashed(unreadable)] * len(outcomes)
            await self._send_result(call.id, decoded)
            return
        await self._write(data)


def _fit(outcomes: list[Outcome], size: int, limit_bytes: int) -> list[Outcome]:
    """`outcomes` with the largest ones failed as `PayloadTooLarge` until the Result fits."""
    too_large = Failure(
        reason=Reason.PAYLOAD_TOO_LARGE,
        type="PayloadTooLarge",
        message=f"the outputs of one call take {size} bytes, over the bound of {limit_bytes}"
        " for a result: emit fewer or smaller payloads, or pass large data by reference"
        " (an object-store URL)",
        retryable=False,
    )
    replacement = len(msgspec.msgpack.encode(too_large))
    sizes = [len(msgspec.msgpack.encode(o)) for o in outcomes]
    fitted = list(outcomes)
    for index in sorted(range(len(outcomes)), key=sizes.__getitem__, reverse=True):
        if size <= limit_bytes:
            break
        fitted[index] = too_large
        size += replacement - sizes[index]
    return fitted


def _portable(outcome: Outcome) -> Outcome:
    try:
        msgspec.msgpack.encode(outcome)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        return Failure(
            reason=Reason.INVALID_OUTPUT,
            type="InvalidOutput",
            message=f"handler output cannot be serialized: {exc}",
            retryable=False,
        )
    return outcome
