"""WorkerPool: calls spread over connections to worker processes, each running a few at once.

The part shared by the two callers of runtime workers: the runtime's supervisor
(`asya.runtime.workers.ProcessInvoker`, which starts the workers and calls them on a socket
pair each) and a sidecar calling a runtime's workers on their own sockets
(`asya.runtime.direct.DirectCalls`). What differs is a subclass's: how workers come and go
(`_retire`), and what a call cut by its worker's end is answered (`_cut`).

A call goes to the least busy worker with room: a worker runs `capacity` calls at once, in
the order sent, and holds `depth` more per running one, queued, so that the next call is
already there when one returns (pipelining). A call's timeout counts from when its worker may
be running it (among its first `capacity` open calls), not from when it was sent; past
`timeout_s + kill_grace_s` it is answered `Timeout` and its worker retired. A call that never
started at its worker (the connection ended first, or the worker said it is leaving and turned
it away) is sent again, to another: it goes back, it is not failed. One the worker had started
is cut (`_cut`). A `drain` turns away every call not started: the ones waiting for a worker,
and the ones queued at one (each worker is told), and a later call is served.
"""

from __future__ import annotations

import abc
import asyncio
import enum
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from asya.actor import ActorConfig
from asya.envelope import Envelope, Reason
from asya.errors import ActorDefinitionError, RuntimeProtocolError, RuntimeUnavailableError
from asya.outcome import Failure, NotStarted, Outcome
from asya.runtime.frames import (
    HANDSHAKE_FRAME_BYTES,
    Call,
    Drain,
    Fault,
    FrameBounds,
    FrameReader,
    FrameWriter,
    PackedCall,
    Ping,
    Pong,
    RawCall,
    RawResult,
    decode_outcome,
    encode_frame,
    encode_outcome,
)
from asya.runtime.requests import Request, Requests

log = logging.getLogger(__name__)


@dataclass(eq=False, slots=True)
class _Call:
    """What is kept with a call sent to a worker, beside its answer."""

    started: bool = False
    """The worker may be running it: its timeout counts from then (`deadline`)."""
    deadline: asyncio.TimerHandle | None = None
    """Answers it `Ended.TIMED_OUT` once it has run past its timeout."""


class Ended(enum.Enum):
    """The answer to a call that its worker did not answer."""

    UNSTARTED = "unstarted"
    """The connection ended and it never ran: send it again, to another worker."""
    CUT = "cut"
    """The connection ended and it may have run: `_cut` says what it is answered."""
    TIMED_OUT = "timed out"
    """It ran past `timeout_s + kill_grace_s`: answered `Timeout`, its worker retired."""


_Answer = list[msgspec.Raw] | Ended

_NOT_STARTED: Final = encode_outcome(NotStarted())


@dataclass(eq=False)
class PoolWorker:
    """One worker as its caller sees it: a connection, and the calls open on it."""

    reader: FrameReader
    frames: FrameWriter
    name: str
    """How logs name it: its process id, or the socket path it listens on."""
    calls: Requests[_Answer, _Call] = field(default_factory=Requests)
    """Calls sent and not answered, in the order sent: the worker runs the first `capacity`."""
    busy: int = 0
    listener: asyncio.Task[None] | None = None
    alive: bool = True
    leaving: bool = False
    """It said it is exiting (after a timed-out call): send it no more; it started nothing
    since, so what it leaves unanswered goes to another worker."""
    result_bytes: int = HANDSHAKE_FRAME_BYTES
    """Largest Result frame read from it: its Pong's bound, once it has answered."""
    pinged: asyncio.Future[None] | None = None
    """Done when it answers the Ping sent to check that its loop runs (`ProcessInvoker`)."""


class WorkerPool(abc.ABC):
    """Invoker over worker connections; see the module docstring."""

    def __init__(self, *, depth: int, kill_grace_s: float) -> None:
        """`depth`: calls queued at each worker per call it runs."""
        self._depth = depth
        self._kill_grace_s = kill_grace_s
        self._workers: list[PoolWorker] = []
        self._changed = asyncio.Event()
        """Set when a call may find a worker with room now (or must give up): waiters clear
        it, look, and wait for it."""
        self._closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        """Work started in the background (a wake-up, a worker's replacement)."""
        self._drains = 0
        """Drains so far: a call waiting for a worker since before the last one is turned away."""
        self.info: ActorConfig | None = None
        self.capacity = 1
        self.bounds: FrameBounds | None = None
        """The workers' frame bounds, from their Pong: what a call may carry and return."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Have workers to call (`info`, `capacity` and `bounds` set)."""

    @abc.abstractmethod
    async def _retire(self, worker: PoolWorker) -> None:
        """Take `worker` out: it timed out or its connection ended; it gets no more calls."""

    @abc.abstractmethod
    async def _cut(self, count: int, why: str) -> list[msgspec.Raw]:
        """The outcomes of a call of `count` envelopes that its worker may have started when
        its connection ended (`why`)."""

    async def invoke(self, envelopes: Sequence[Envelope]) -> list[Outcome]:
        def frame(call_id: int) -> bytes:
            return encode_frame(Call(call_id, list(envelopes)))

        return [decode_outcome(raw) for raw in await self._call(frame, len(envelopes))]

    async def invoke_packed(self, envelopes: msgspec.Raw, count: int) -> list[Outcome]:
        """As `invoke`, with the `count` envelopes encoded already (`pack_envelopes`)."""

        def frame(call_id: int) -> bytes:
            return encode_frame(PackedCall(call_id, envelopes))

        return [decode_outcome(raw) for raw in await self._call(frame, count)]

    async def invoke_raw(self, envelopes: list[msgspec.Raw]) -> list[msgspec.Raw]:
        """As `invoke`, with the envelopes and their outcomes left as msgpack: the runtime's
        supervisor forwards calls without decoding them."""

        def frame(call_id: int) -> bytes:
            return encode_frame(RawCall(call_id, envelopes))

        return await self._call(frame, len(envelopes))

    @property
    def held(self) -> int:
        """Calls sent to the workers and not answered yet: running, or queued behind."""
        return sum(len(w.calls) for w in self._workers)

    def drain(self) -> None:
        """Calls not started now are answered `NotStarted`: those waiting for a worker, and
        those queued at one (each worker is told to turn them away). Later calls are served."""
        self._drains += 1
        for worker in self._workers:
            worker.frames.send(encode_frame(Drain(0)))
        self._changed.set()

    def _background(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _cancel_background(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _add(self, worker: PoolWorker) -> None:
        """`worker` (handshaken) takes calls from now on."""
        worker.listener = asyncio.create_task(self._listen(worker))
        self._workers.append(worker)
        self._changed.set()

    async def _remove(self, worker: PoolWorker) -> bool:
        """Take `worker` off the pool; whether it was on it."""
        worker.alive = False
        if worker not in self._workers:
            return False
        self._workers.remove(worker)
        self._changed.set()
        return True

    async def _call(self, frame: Callable[[int], bytes], count: int) -> list[msgspec.Raw]:
        """Send the Call `frame(id)` for `count` envelopes to a worker with room; its outcomes.
        A call that never started at its worker is sent again, to another."""
        await self.start()
        self._check_open()
        drains = self._drains
        while True:
            worker = await self._acquire(drains)
            if worker is None:
                return [_NOT_STARTED] * count
            outcomes = await self._call_worker(worker, frame, count)
            if outcomes is not None:
                return outcomes

    async def _call_worker(
        self, worker: PoolWorker, frame: Callable[[int], bytes], count: int
    ) -> list[msgspec.Raw] | None:
        call = _Call()
        request = worker.calls.open(call)
        self._mark_started(worker)
        try:
            worker.frames.send(frame(request.id))
            await worker.frames.drain()
            answer = await request.answer
            if answer is Ended.TIMED_OUT:
                log.warning(
                    "worker retired: a call ran past its timeout",
                    extra={"call": request.id, "worker": worker.name},
                )
                await self._retire(worker)
                return [encode_outcome(self._timeout_failure())] * count
            if answer is Ended.UNSTARTED:
                return None
            if answer is Ended.CUT:
                return await self._cut(count, "the worker process exited")
            if worker.leaving and answer[0] == _NOT_STARTED:
                return None  # turned away by a worker on its way out: to another one
            return answer
        except ConnectionError:
            await self._retire(worker)
            if not call.started:
                return None
            return await self._cut(count, "the worker's connection broke")
        finally:
            if call.deadline is not None:
                call.deadline.cancel()
            # Answered calls were taken off by the listener, which timed the next one already.
            if worker.calls.close(request.id):
                self._mark_started(worker)
            worker.busy -= 1
            self._changed.set()

    def _mark_started(self, worker: PoolWorker) -> None:
        """The worker runs its first `capacity` calls (it starts them in the order sent):
        their timeouts count from now."""
        for place, request in enumerate(worker.calls):
            if place >= self.capacity:
                return
            call = request.context
            if not call.started:
                call.started = True
                assert self.info is not None
                limit_s = self.info.timeout_s + self._kill_grace_s
                call.deadline = asyncio.get_running_loop().call_later(
                    limit_s, worker.calls.answer, request.id, Ended.TIMED_OUT
                )

    async def _acquire(self, drains: int) -> PoolWorker | None:
        """The least busy worker with room for one more call; None if a drain came since the
        call asked (its count was `drains`).

        Raises:
            RuntimeUnavailableError: the pool was closed while the call waited.
        """
        room = self.capacity * (1 + self._depth)
        while True:
            if self._drains != drains:
                return None
            self._check_open()
            free = [w for w in self._workers if w.alive and not w.leaving and w.busy < room]
            if free:
                worker = min(free, key=lambda w: w.busy)
                worker.busy += 1
                return worker
            self._changed.clear()
            await self._changed.wait()

    def _check_open(self) -> None:
        """Raises RuntimeUnavailableError if the pool takes no calls any more."""
        if self._closed:
            raise RuntimeUnavailableError("the workers were closed")

    async def _handshake(self, worker: PoolWorker) -> Pong:
        """Ping `worker` and read its Pong: sent once the handler is loaded.

        Raises:
            ActorDefinitionError: the worker could not load the handler (it sent a Fault).
            RuntimeProtocolError: it answered something else.
            ConnectionError: it closed the connection first (see its stderr).
        """
        worker.frames.send(encode_frame(Ping(0)))
        await worker.frames.drain()
        frame = await worker.reader.read(HANDSHAKE_FRAME_BYTES)
        if isinstance(frame, Pong):
            worker.result_bytes = frame.bounds.result_bytes
            return frame
        if isinstance(frame, Fault):
            raise ActorDefinitionError(f"runtime worker could not start: {frame.message}")
        if frame is None:
            raise ConnectionError("the worker closed its connection before answering")
        raise RuntimeProtocolError(f"expected a Pong from the worker, got {type(frame).__name__}")

    async def _listen(self, worker: PoolWorker) -> None:
        try:
            while True:
                frame = await worker.reader.read_raw(worker.result_bytes)
                if frame is None:
                    break
                if isinstance(frame, RawResult):
                    if worker.calls.answer(frame.id, frame.outcomes):
                        self._mark_started(worker)  # the next one runs now: time it
                elif isinstance(frame, Drain):
                    worker.leaving = True
                elif (
                    isinstance(frame, Pong)
                    and worker.pinged is not None
                    and not worker.pinged.done()
                ):
                    worker.pinged.set_result(None)
        except (RuntimeProtocolError, ConnectionError) as exc:
            log.error("worker connection failed", extra={"error": str(exc), "worker": worker.name})
        finally:
            # Also when cancelled (its worker was killed first): the calls queued behind go
            # to another worker instead of waiting out a timeout here.
            worker.calls.end(lambda request: _ended(request, worker.leaving))
        if worker.alive:
            await self._retire(worker)

    def _timeout_failure(self) -> Failure:
        assert self.info is not None
        return Failure(
            reason=Reason.TIMEOUT,
            type="Timeout",
            message=f"'{self.info.name}' ran past its timeout of {self.info.timeout_s:g} s"
            " and its worker process was replaced",
            retryable=self.info.retry.retry_timeouts,
        )


def _ended(request: Request[_Answer, _Call], leaving: bool) -> _Answer:
    """The answer to a call left open when its worker's connection ended: cut if it may have
    run, to be sent again if it never ran."""
    if request.context.started and not leaving:
        return Ended.CUT
    return Ended.UNSTARTED
