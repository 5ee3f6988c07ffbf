"""DirectCalls: a sidecar's calls to the runtime's worker processes, on the workers' own sockets.

The runtime's supervisor names where its workers listen (its Pong's `worker_paths`, then a
`Workers` frame whenever one is replaced; `asya.runtime.frames`). This pool connects to each,
pings it, and calls it with the frames the supervisor would have forwarded: a call crosses two
processes instead of three, and the supervisor's reads, writes and wake-ups per call are gone.
What the supervisor did for a forwarded call is done here, or asked of it
(`asya.runtime.pool` does the rest, as it does for the supervisor):

- a call past `timeout_s + kill_grace_s` is answered `Timeout` here, and the supervisor is told
  to kill that worker and start another (`Retire`);
- a call its worker may have started when the worker's connection ended is `WorkerCrashed` if
  the runtime still answers a Ping (that worker died; the supervisor replaces it), and
  `RuntimeUnavailableError` if it does not, or if it said it is stopping (a Drain): the runtime
  went away, and the call waits for it like any call cut by a lost runtime
  (`asya_sidecar.runtime_link`), instead of counting as a failed attempt;
- a Drain from the runtime (it is stopping) turns away the calls not started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Final, Protocol

import msgspec

from asya.errors import ActorDefinitionError, RuntimeProtocolError, RuntimeUnavailableError
from asya.outcome import worker_crashed
from asya.runtime.frames import FrameReader, FrameWriter, Pong, encode_outcome
from asya.runtime.pool import PoolWorker, WorkerPool

log = logging.getLogger(__name__)

CUT_PING_S: Final = 10.0
"""How long a cut call waits for the runtime to answer a Ping before it takes the runtime
for gone (a frozen runtime is as good as gone)."""

JOIN_WAIT_S: Final = 5.0
"""How long `join` waits for every worker before it returns with those that answered: a
worker whose async handler holds its loop answers its Ping late, and joins when it does."""


class Supervisor(Protocol):
    """The runtime's supervisor, as the pool needs it: the sidecar's connection to it."""

    async def ping(self) -> Pong:
        """Raises RuntimeUnavailableError if the runtime does not answer."""
        ...

    def retire(self, worker: str) -> None: ...

    def unreachable(self) -> None:
        """None of the workers the runtime names can be reached: call through its socket."""
        ...


class DirectCalls(WorkerPool):
    """Invoker over the runtime's workers, called directly; see the module docstring."""

    def __init__(self, pong: Pong, supervisor: Supervisor, *, depth: int) -> None:
        """`pong`: the supervisor's, which says what the workers serve, and its kill grace."""
        super().__init__(depth=depth, kill_grace_s=pong.kill_grace_s)
        self.info, self.capacity, self.bounds = pong.actor, pong.capacity, pong.bounds
        self._supervisor = supervisor
        self._known: set[str] = set()
        """Paths joined or being joined: each is joined once (a path is never reused)."""
        self._joins: set[asyncio.Task[None]] = set()
        self._latest: list[str] = []
        """The paths the runtime named last."""
        self._failed: set[str] = set()
        """Paths that could not be joined (not a socket there, refused, not allowed)."""
        self._stopping = False

    async def start(self) -> None:
        return  # the workers come with `join`

    @property
    def workers(self) -> int:
        """Workers joined and taking calls."""
        return sum(1 for w in self._workers if w.alive and not w.leaving)

    @property
    def joining(self) -> bool:
        """Whether a worker is still being joined (by another task than this one)."""
        current = asyncio.current_task()
        return any(not join.done() and join is not current for join in self._joins)

    @property
    def unreachable(self) -> bool:
        """The runtime names workers, and none of them could be joined: from here their
        sockets cannot be reached (another directory, say)."""
        return (
            bool(self._latest)
            and self.workers == 0
            and not self.joining
            and all(path in self._failed for path in self._latest)
        )

    async def join(self, paths: Sequence[str]) -> None:
        """Join the workers at `paths` (see `update`); returns once each has joined or
        failed, or after `JOIN_WAIT_S` (the others go on joining in the background; calls
        wait for a worker meanwhile)."""
        pending = self.update(paths)
        if pending:
            await asyncio.wait(pending, timeout=JOIN_WAIT_S)

    def update(self, paths: Sequence[str]) -> set[asyncio.Task[None]]:
        """The runtime's workers now listen on `paths` (a `Workers` frame): join the ones not
        joined yet, in the background (their tasks). One that is gone already is left out,
        with a log line; one not named any more is gone or going: its connection ends."""
        if self._closed:
            return set()
        self._latest = list(paths)
        fresh = [path for path in paths if path not in self._known]
        self._known.update(fresh)
        joins = {self._background(self._join(path)) for path in fresh}
        self._joins = {join for join in self._joins if not join.done()} | joins
        return joins

    def stopping(self) -> None:
        """The runtime said it is stopping: calls not started are turned away, a later call
        and a call cut from now on wait for the runtime to come back
        (`RuntimeUnavailableError`); the calls running finish."""
        self._stopping = True
        self.drain()

    def _check_open(self) -> None:
        super()._check_open()
        if self._stopping:
            raise RuntimeUnavailableError("the runtime is stopping")

    async def aclose(self) -> None:
        self._closed = True
        self._stopping = True
        await self._cancel_background()
        workers, self._workers = list(self._workers), []
        for worker in workers:
            worker.alive = False
            worker.frames.close()
        listeners = [w.listener for w in workers if w.listener is not None]
        for listener in listeners:
            listener.cancel()
        await asyncio.gather(*listeners, return_exceptions=True)
        self._changed.set()  # calls waiting for a worker fail: there will be none

    async def _join(self, path: str) -> None:
        try:
            reader, writer = await asyncio.open_unix_connection(path)
        except OSError as exc:
            log.info("worker not joined", extra={"worker": path, "error": str(exc)})
            self._join_failed(path)
            return
        worker = PoolWorker(FrameReader(reader), FrameWriter(writer), name=path)
        joined = False
        assert self.info is not None
        limit_s = self.info.timeout_s + self._kill_grace_s
        try:
            # A worker the runtime names has loaded its handler: it answers once its loop is
            # free (an async handler may hold it for a while). One held longer than a call may
            # run is stuck, as by a call a sidecar before this one left running: retired.
            async with asyncio.timeout(limit_s):
                await self._handshake(worker)
            if not self._closed:
                await self._add(worker)
                joined = True
        except TimeoutError:
            log.warning("worker retired: it did not answer a ping", extra={"worker": path})
            self._supervisor.retire(path)
        except (ConnectionError, ActorDefinitionError, RuntimeProtocolError) as exc:
            log.warning("worker not joined", extra={"worker": path, "error": str(exc)})
            self._join_failed(path)
        finally:
            if not joined:  # also when cancelled (the pool closing)
                worker.frames.close()

    def _join_failed(self, path: str) -> None:
        self._failed.add(path)
        if self.unreachable and not self._closed:
            self._supervisor.unreachable()

    async def _retire(self, worker: PoolWorker) -> None:
        """No more calls to `worker`; the supervisor kills it and starts another. Its calls
        still open end with its connection, closed here."""
        if not await self._remove(worker):
            return
        self._supervisor.retire(worker.name)
        worker.frames.close()

    async def _cut(self, count: int, why: str) -> list[msgspec.Raw]:
        if not self._stopping:
            with contextlib.suppress(RuntimeUnavailableError, TimeoutError):
                async with asyncio.timeout(CUT_PING_S):
                    await self._supervisor.ping()
                # The Pong comes after any Drain the runtime sent before it: read again.
                if not self._stopping:
                    crashed = worker_crashed(f"{why} during the call; the runtime replaces it")
                    return [encode_outcome(crashed)] * count
        raise RuntimeUnavailableError(f"the runtime went away during the call ({why})")
