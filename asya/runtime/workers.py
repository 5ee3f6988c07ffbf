"""ProcessInvoker: run an actor's handler in worker processes that can be killed.

The runtime's guarantee that no call outlives its timeout rests here. Each worker is a child
process (`asya.runtime.worker`) speaking the frame protocol on a socket pair; calls go to a
worker with free capacity (one call at a time for sync handlers, `concurrency` for async ones).
If a worker has not answered `timeout_s + kill_grace_s` after a call was sent, it is killed and
replaced, and its calls are answered `Timeout`. A worker that dies answers its calls
`WorkerCrashed` (retryable) and is replaced. Workers run user code, so their environment is the
runtime's without the broker's address and credentials (`user_environment`). Used by the
runtime server and, for actors that must not share the caller's process (GPU actors), by the
local runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import sys
from asyncio import FIRST_COMPLETED
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from asya.actor import ActorConfig
from asya.envelope import Envelope, Reason
from asya.errors import ActorDefinitionError, RuntimeProtocolError
from asya.outcome import Failure, NotStarted, Outcome, worker_crashed
from asya.runtime.frames import (
    HANDSHAKE_FRAME_BYTES,
    Call,
    Drain,
    Fault,
    FrameBounds,
    FrameReader,
    FrameWriter,
    Ping,
    Pong,
    RawCall,
    RawResult,
    decode_outcome,
    encode_frame,
    encode_outcome,
)
from asya.runtime.requests import Request, Requests
from asya.settings import env_var

log = logging.getLogger(__name__)


def user_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without any `ASYA_BROKER_*` variable: user code never sees the broker's secrets."""
    secret = env_var("broker_")
    return {name: value for name, value in env.items() if not name.startswith(secret)}


@dataclass(eq=False, slots=True)
class _Call:
    """What is kept with a call sent to a worker, beside its answer."""

    count: int
    """Envelopes it carries."""
    started: asyncio.Future[None]
    """Done once the worker may be running it: its timeout counts from then."""


_Answer = list[msgspec.Raw] | None
"""A call's outcomes; None if it never started at its worker (send it again)."""

_Calls = Requests[_Answer, _Call]


@dataclass(eq=False)
class _Worker:
    process: asyncio.subprocess.Process
    reader: FrameReader
    frames: FrameWriter
    calls: _Calls = field(default_factory=_Calls)
    """Calls sent and not answered, in the order sent: the worker runs the first `capacity`."""
    busy: int = 0
    listener: asyncio.Task[None] | None = None
    alive: bool = True
    leaving: bool = False
    """It said it is exiting (after a timed-out call): send it no more; it started nothing
    since, so what it leaves unanswered goes to another worker."""
    result_bytes: int = HANDSHAKE_FRAME_BYTES
    """Largest Result frame read from it: its Pong's bound, once it has answered."""


_NOT_STARTED: Final = encode_outcome(NotStarted())


class ProcessInvoker:
    """Invoker over a pool of worker processes; see the module docstring."""

    def __init__(
        self,
        handler: str,
        *,
        env: Mapping[str, str],
        workers: int = 0,
        depth: int = 1,
        kill_grace_s: float = 2.0,
        start_timeout_s: float = 300.0,
        python: str = sys.executable,
    ) -> None:
        """`env` is the workers' environment (less the broker's variables); `workers` 0 means
        as many as needed; `depth`: calls queued at each worker per call it runs."""
        self._env = {**user_environment(env), env_var("handler"): handler}
        self._wanted = workers
        self._depth = depth
        self._kill_grace_s = kill_grace_s
        self._start_timeout_s = start_timeout_s
        self._python = python
        self._workers: list[_Worker] = []
        self._changed = asyncio.Condition()
        self._replacing: set[asyncio.Task[None]] = set()
        self._closed = False
        self._drains = 0
        """Drains so far: a call waiting for a worker since before the last one is turned away."""
        self.info: ActorConfig | None = None
        self.capacity = 1
        self.bounds: FrameBounds | None = None
        """The workers' frame bounds, from their Pong: what a call may carry and return."""

    async def start(self) -> None:
        """Start the workers; returns once each has loaded the handler.

        Raises:
            ActorDefinitionError: a worker could not load the handler (the message says why).
        """
        if self.info is not None:
            return
        first, pong = await self._spawn()
        self.info, self.capacity, self.bounds = pong.actor, pong.capacity, pong.bounds
        count = self._wanted or math.ceil(pong.actor.concurrency / pong.capacity)
        started = [first] + [(await self._spawn())[0] for _ in range(count - 1)]
        async with self._changed:
            self._workers.extend(started)
            self._changed.notify_all()

    async def invoke(self, envelopes: Sequence[Envelope]) -> list[Outcome]:
        def frame(call_id: int) -> bytes:
            return encode_frame(Call(call_id, list(envelopes)))

        return [decode_outcome(raw) for raw in await self._call(frame, len(envelopes))]

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
        self._background(self._wake())

    async def _wake(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _call(self, frame: Callable[[int], bytes], count: int) -> list[msgspec.Raw]:
        """Send the Call `frame(id)` for `count` envelopes to a worker with room; its outcomes.
        A call that never started at its worker (it crashed, or left after a timed-out call)
        is sent again, to another: it goes back, it is not failed."""
        await self.start()
        drains = self._drains
        while True:
            worker = await self._acquire(drains)
            if worker is None:
                return [_NOT_STARTED] * count
            outcomes = await self._call_worker(worker, frame, count)
            if outcomes is not None:
                return outcomes

    async def _call_worker(
        self, worker: _Worker, frame: Callable[[int], bytes], count: int
    ) -> list[msgspec.Raw] | None:
        assert self.info is not None
        call = _Call(count, asyncio.get_running_loop().create_future())
        request = worker.calls.open(call)
        self._mark_started(worker)
        try:
            worker.frames.send(frame(request.id))
            await worker.frames.drain()
            if not call.started.done():  # queued behind calls it runs: not timed yet
                await asyncio.wait((call.started, request.answer), return_when=FIRST_COMPLETED)
            limit = self.info.timeout_s + self._kill_grace_s
            try:
                outcomes = await asyncio.wait_for(asyncio.shield(request.answer), limit)
            except TimeoutError:
                log.warning("worker killed: call ran past its timeout", extra={"call": request.id})
                await self._retire(worker)
                return [encode_outcome(self._timeout_failure())] * count
            if outcomes is None or outcomes[0] == _NOT_STARTED:
                # It never started: to another worker, unless a drain came since it was asked.
                return None
            return outcomes
        except ConnectionError:
            await self._retire(worker)
            if not call.started.done():
                return None
            return [encode_outcome(_crashed("the worker's connection broke"))] * count
        finally:
            # Answered calls were taken off by the listener, which timed the next one already.
            if worker.calls.close(request.id):
                self._mark_started(worker)
            async with self._changed:
                worker.busy -= 1
                self._changed.notify_all()

    def _mark_started(self, worker: _Worker) -> None:
        """The worker runs its first `capacity` calls (it starts them in the order sent)."""
        for place, request in enumerate(worker.calls):
            if place >= self.capacity:
                return
            if not request.context.started.done():
                request.context.started.set_result(None)

    async def aclose(self) -> None:
        self._closed = True
        for task in list(self._replacing):
            task.cancel()
        await asyncio.gather(*self._replacing, return_exceptions=True)
        # All at once: each closes its instance within the grace, not one grace after another.
        await asyncio.gather(
            *(self._stop(worker, grace_s=self._kill_grace_s) for worker in list(self._workers))
        )
        self._workers.clear()

    async def _acquire(self, drains: int) -> _Worker | None:
        """The least busy worker with room for one more call; None if a drain came since the
        call asked (its count was `drains`)."""
        room = self.capacity * (1 + self._depth)
        async with self._changed:
            while True:
                if self._drains != drains:
                    return None
                free = [w for w in self._workers if w.alive and not w.leaving and w.busy < room]
                if free:
                    worker = min(free, key=lambda w: w.busy)
                    worker.busy += 1
                    return worker
                await self._changed.wait()

    async def _spawn(self) -> tuple[_Worker, Pong]:
        parent, child = socket.socketpair()
        try:
            process = await asyncio.create_subprocess_exec(
                self._python,
                "-m",
                "asya.runtime.worker",
                str(child.fileno()),
                str(os.getpid()),
                pass_fds=(child.fileno(),),
                env=self._env,
                stdin=asyncio.subprocess.DEVNULL,
            )
        finally:
            child.close()
        reader, writer = await asyncio.open_unix_connection(sock=parent)
        worker = _Worker(process, FrameReader(reader), FrameWriter(writer))
        try:
            pong = await asyncio.wait_for(self._handshake(worker), self._start_timeout_s)
        except (TimeoutError, ActorDefinitionError, RuntimeProtocolError, ConnectionError):
            await self._stop(worker)
            raise
        worker.result_bytes = pong.bounds.result_bytes
        worker.listener = asyncio.create_task(self._listen(worker))
        return worker, pong

    async def _handshake(self, worker: _Worker) -> Pong:
        worker.frames.send(encode_frame(Ping(0)))
        await worker.frames.drain()
        frame = await worker.reader.read(HANDSHAKE_FRAME_BYTES)
        if isinstance(frame, Pong):
            return frame
        if isinstance(frame, Fault):
            raise ActorDefinitionError(f"runtime worker could not start: {frame.message}")
        code = await worker.process.wait()
        raise ActorDefinitionError(
            f"runtime worker exited with code {code} before loading the handler (see its stderr)"
        )

    async def _listen(self, worker: _Worker) -> None:
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
        except (RuntimeProtocolError, ConnectionError) as exc:
            log.error("worker connection failed", extra={"error": str(exc)})
        finally:
            # Also when cancelled (its worker was killed first): the calls queued behind go
            # to another worker instead of waiting out a timeout here.
            worker.calls.end(lambda request: _ended(request, worker.leaving))
        if worker.alive:
            await self._retire(worker)

    async def _retire(self, worker: _Worker) -> None:
        """Kill `worker` and start a replacement in the background."""
        if not worker.alive:
            return
        worker.alive = False
        async with self._changed:
            if worker in self._workers:
                self._workers.remove(worker)
        await self._stop(worker)
        if not self._closed:
            self._background(self._replace())

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._replacing.add(task)
        task.add_done_callback(self._replacing.discard)

    async def _replace(self) -> None:
        delay_s = 0.5
        while True:
            try:
                worker, _ = await self._spawn()
                break
            except Exception:
                log.exception("could not start a replacement worker; trying again")
                await asyncio.sleep(delay_s)
                delay_s = min(delay_s * 2, 30.0)
        async with self._changed:
            self._workers.append(worker)
            self._changed.notify_all()

    async def _stop(self, worker: _Worker, *, grace_s: float = 0.0) -> None:
        """Close the worker's socket (it exits on its own) and kill it after `grace_s`."""
        worker.alive = False
        worker.frames.close()
        try:
            await asyncio.wait_for(worker.process.wait(), grace_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                worker.process.kill()
            await worker.process.wait()
        if worker.listener is not None and worker.listener is not asyncio.current_task():
            worker.listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker.listener

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
    """The answer to a call left open when its worker's connection ended: `WorkerCrashed` if
    it may have run, None (send it again) if it never ran."""
    if request.context.started.done() and not leaving:
        return [encode_outcome(_crashed("the worker process exited"))] * request.context.count
    return None


def _crashed(why: str) -> Failure:
    return worker_crashed(f"{why} during the call; the worker was replaced")
