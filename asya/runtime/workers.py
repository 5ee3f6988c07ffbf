"""ProcessInvoker: run an actor's handler in worker processes that can be killed.

The runtime's guarantee that no call outlives its timeout rests here. Each worker is a child
process (`asya.runtime.worker`) speaking the frame protocol on a socket pair; calls go to a
worker with free capacity (one call at a time for sync handlers, `concurrency` for async ones),
as `asya.runtime.pool` says. If a worker has not answered `timeout_s + kill_grace_s` after a
call started, it is killed and replaced, and its calls are answered `Timeout`. A worker that
dies answers its calls `WorkerCrashed` (retryable) and is replaced. Workers run user code, so
their environment is the runtime's without the broker's address and credentials
(`user_environment`), and each dies with this process (`asya.runtime.worker.die_with_parent`).
Used by the runtime server and, for actors that must not share the caller's process (GPU
actors, sync handlers under `asya serve`), by the local runner.

Direct calls (`direct_path`): in a pod, each worker also listens on a socket of its own in the
runtime's socket directory (`paths`), and the sidecar calls it there (`asya.runtime.direct`),
skipping this process. This process still starts and replaces the workers (`on_workers` is
told), kills one whose direct call the sidecar saw run past its timeout (`retire`), and kills
any whose loop does not answer a Ping once no sidecar has called them for a while
(`retire_unresponsive`, asked by the runtime server): nothing a sidecar left running goes on
unwatched.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import os
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import msgspec

from asya.errors import ActorDefinitionError, RuntimeProtocolError
from asya.outcome import Failure, worker_crashed
from asya.runtime.frames import (
    FrameReader,
    FrameWriter,
    Ping,
    Pong,
    encode_frame,
    encode_outcome,
)
from asya.runtime.pool import PoolWorker, WorkerPool
from asya.settings import env_var

log = logging.getLogger(__name__)

PING_WAIT_S: Final = 1.0
"""At least how long a worker whose loop runs takes to answer a Ping (`retire_unresponsive`
waits the kill grace, if longer)."""

MAX_DIRECT_CONNECTIONS: Final = 4
"""Connections a worker's direct socket queues: the sidecar needs one; a restarted sidecar's
may come while the old one's is closing."""


def user_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without any `ASYA_BROKER_*` variable: user code never sees the broker's secrets."""
    secret = env_var("broker_")
    return {name: value for name, value in env.items() if not name.startswith(secret)}


@dataclass(eq=False)
class _Worker(PoolWorker):
    process: asyncio.subprocess.Process | None = None
    path: str | None = None
    """The socket it listens on for direct calls (see the module docstring), if any."""


class ProcessInvoker(WorkerPool):
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
        direct_path: str | None = None,
    ) -> None:
        """`env` is the workers' environment (less the broker's variables); `workers` 0 means
        as many as needed; `depth`: calls queued at each worker per call it runs;
        `direct_path`: each worker also listens on a socket of its own, this path and a
        suffix (`paths`), for callers that skip this process."""
        super().__init__(depth=depth, kill_grace_s=kill_grace_s)
        self._env = {**user_environment(env), env_var("handler"): handler}
        self._wanted = workers
        self._start_timeout_s = start_timeout_s
        self._python = python
        self._direct_path = _fitting(direct_path)
        self._direct_ids = itertools.count(1)
        self._retiring: set[asyncio.Task[None]] = set()
        """Retirements asked for (`retire`, `retire_unresponsive`): finished, not cancelled,
        on close."""
        self.on_workers: Callable[[], None] | None = None
        """Told whenever `paths` or `direct` may have changed (a worker replaced)."""

    @property
    def direct(self) -> bool:
        """Whether each worker listens on a socket of its own (`paths`) for direct calls."""
        return self._direct_path is not None

    @property
    def kill_grace_s(self) -> float:
        """How long past its timeout a call runs before its worker is killed."""
        return self._kill_grace_s

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
        for worker in started:
            await self._add(worker)

    @property
    def paths(self) -> list[str]:
        """Where the workers taking calls listen for direct ones (none while `direct` is off,
        or while every worker is being replaced)."""
        return [
            w.path
            for w in self._workers
            if isinstance(w, _Worker) and w.alive and not w.leaving and w.path is not None
        ]

    def retire(self, path: str) -> None:
        """Kill the worker listening on `path` and start another (a direct caller's call to
        it ran past its timeout); a path no worker has any more is ignored."""
        for worker in self._workers:
            if isinstance(worker, _Worker) and worker.path == path:
                log.warning(
                    "worker killed: a direct call ran past its timeout", extra={"path": path}
                )
                self._retire_soon(worker, grace_s=0.0)

    def retire_unresponsive(self) -> None:
        """Ping every worker, and retire (kill and replace) each that does not answer within
        the kill grace: its event loop is held, as by a call that ran past its timeout with no
        caller left to retire it (a direct caller that went away). A worker whose loop runs
        times its own calls (a sync call past its timeout is abandoned and the worker leaves;
        an async one is cancelled), so it is left alone."""
        for worker in list(self._workers):
            self._background(self._check(worker))

    async def _check(self, worker: PoolWorker) -> None:
        if worker.pinged is not None or not worker.alive:
            return
        answered = asyncio.get_running_loop().create_future()
        worker.pinged = answered
        try:
            worker.frames.send(encode_frame(Ping(0)))
            await asyncio.wait_for(answered, max(self._kill_grace_s, PING_WAIT_S))
        except TimeoutError:
            log.warning(
                "worker killed: its loop did not answer a ping, and no caller watches its calls",
                extra={"worker": worker.name},
            )
            self._retire_soon(worker, grace_s=0.0)
        finally:
            worker.pinged = None

    def _retire_soon(self, worker: PoolWorker, *, grace_s: float) -> None:
        task = asyncio.create_task(self._retire(worker, grace_s=grace_s))
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def aclose(self, grace_s: float | None = None) -> None:
        """Stop the workers: each finishes its calls within `grace_s` (default: the kill
        grace), all at once, then is killed."""
        self._closed = True
        # A retirement under way ends with its worker stopped, not half-way (its socket left).
        await asyncio.gather(*self._retiring, return_exceptions=True)
        await self._cancel_background()
        self._changed.set()  # calls waiting for a worker fail: there will be none
        grace_s = self._kill_grace_s if grace_s is None else grace_s
        await asyncio.gather(*(self._stop(w, grace_s=grace_s) for w in list(self._workers)))
        self._workers.clear()

    async def _spawn(self) -> tuple[_Worker, Pong]:
        parent, child = socket.socketpair()
        listening, path = self._listening_socket()
        passed = [child] if listening is None else [child, listening]
        argv = [str(s.fileno()) for s in passed]
        argv.insert(1, str(os.getpid()))
        try:
            process = await asyncio.create_subprocess_exec(
                self._python,
                "-m",
                "asya.runtime.worker",
                *argv,
                pass_fds=[s.fileno() for s in passed],
                env=self._env,
                stdin=asyncio.subprocess.DEVNULL,
            )
        except BaseException:
            _unlink(path)
            raise
        finally:
            for passed_socket in passed:  # the worker holds them now
                passed_socket.close()
        reader, writer = await asyncio.open_unix_connection(sock=parent)
        worker = _Worker(
            FrameReader(reader),
            FrameWriter(writer),
            name=f"pid {process.pid}",
            process=process,
            path=path,
        )
        try:
            pong = await asyncio.wait_for(self._handshake(worker), self._start_timeout_s)
        except ConnectionError:
            # It closed its socket: it is exiting, say how (killed if it does not).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), self._kill_grace_s)
            await self._stop(worker)
            raise ActorDefinitionError(
                f"runtime worker exited with code {process.returncode} before loading the"
                " handler (see its stderr)"
            ) from None
        except (TimeoutError, ActorDefinitionError, RuntimeProtocolError):
            await self._stop(worker)
            raise
        return worker, pong

    def _listening_socket(self) -> tuple[socket.socket | None, str | None]:
        """A listening socket for the next worker's direct calls, and its path; none if direct
        calls are off, or once one could not be made (then they stay off, with a warning)."""
        if self._direct_path is None:
            return None, None
        path = f"{self._direct_path}.w{next(self._direct_ids)}"
        listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            _unlink(path)  # left by a killed predecessor
            listening.bind(path)
            os.chmod(path, 0o660)
            listening.listen(MAX_DIRECT_CONNECTIONS)
        except OSError as exc:
            listening.close()
            log.warning(
                "direct calls off: a worker socket could not be made; calls go through the"
                " runtime's socket from now on",
                extra={"path": path, "error": str(exc)},
            )
            self._direct_path = None
            self._workers_changed()  # callers of the workers must come back through it
            return None, None
        return listening, path

    async def _retire(self, worker: PoolWorker, *, grace_s: float = 0.0) -> None:
        """Kill `worker` (after `grace_s` to stop on its own) and start a replacement in the
        background."""
        if not worker.alive:
            return
        await self._remove(worker)
        await self._stop(worker, grace_s=grace_s)
        self._workers_changed()
        if not self._closed:
            self._background(self._replace())

    async def _cut(self, count: int, why: str) -> list[msgspec.Raw]:
        return [encode_outcome(_crashed(why))] * count

    def _workers_changed(self) -> None:
        if self.on_workers is not None:
            self.on_workers()

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
        await self._add(worker)
        self._workers_changed()

    async def _stop(self, worker: PoolWorker, *, grace_s: float = 0.0) -> None:
        """Close the worker's socket (it exits on its own) and kill it after `grace_s`."""
        assert isinstance(worker, _Worker)
        worker.alive = False
        worker.frames.close()
        assert worker.process is not None
        try:
            await asyncio.wait_for(worker.process.wait(), grace_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                worker.process.kill()
            await worker.process.wait()
        _unlink(worker.path)
        if worker.listener is not None and worker.listener is not asyncio.current_task():
            worker.listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker.listener


_SOCKET_PATH_BYTES: Final = 107
"""The longest path a Unix socket may have (Linux; 103 on macOS, where a longer path fails
to bind and turns direct calls off, as below)."""


def _fitting(direct_path: str | None) -> str | None:
    """`direct_path`, or None (direct calls off, with a warning) if the workers' socket paths
    after it (`.w` and up to seven digits) would be too long for a Unix socket."""
    if direct_path is None:
        return None
    if len(os.fsencode(f"{direct_path}.w{10**6}")) <= _SOCKET_PATH_BYTES:
        return direct_path
    log.warning(
        "direct calls off: the workers' socket paths would be too long; calls go through the"
        " runtime's socket (shorten ASYA_SOCKET_PATH to call the workers directly)",
        extra={"socket": direct_path},
    )
    return None


def _unlink(path: str | None) -> None:
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _crashed(why: str) -> Failure:
    return worker_crashed(f"{why} during the call; the worker was replaced")
