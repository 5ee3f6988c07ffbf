"""RuntimeServer: serve an invoker on a Unix socket, and shut down without losing calls.

Accepts connections (normally one persistent connection from the sidecar; at most
`max_connections`, the rest are closed at once) and serves each with
`asya.runtime.connection.Connection`. The socket's directory, if the server has to create it,
is private to the runtime's user (0700); one that exists (a Kubernetes emptyDir shared with the
sidecar) is left as it is. `stop(grace_s)` stops accepting, answers the calls queued and not
started `NotStarted` (the sidecar gives their envelopes back), lets calls in flight finish
within the grace period, cancels the rest (their envelopes are still unacked at the
sidecar, so the broker redelivers them) and removes the socket file.

With `workers` (the pod's runtime), a sidecar whose Ping asks for direct calls is told where
the workers listen and calls them there (`asya.runtime.direct`); the server tells it whenever a
worker is replaced, kills the workers it `Retire`s, tells it first when stopping (a Drain), and
when no such sidecar has been connected for the actor's timeout and kill grace, pings each
worker and has those that do not answer replaced (`ProcessInvoker.retire_unresponsive`): a
call one left running is not left running unwatched.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final, Protocol

from asya.actor import ActorConfig
from asya.runtime.connection import ForwardedInvoker, ForwardingConnection
from asya.runtime.frames import FRAME_TIMEOUT_S, FrameBounds

log = logging.getLogger(__name__)

MAX_CONNECTIONS: Final = 4
"""Connections served at once: the sidecar needs one; a few more let a probe or a restarted
sidecar in while an old connection is still closing."""


class DirectWorkers(Protocol):
    """Workers that can be called directly: the supervisor's `ProcessInvoker`."""

    on_workers: Callable[[], None] | None

    @property
    def direct(self) -> bool: ...

    @property
    def paths(self) -> list[str]: ...

    @property
    def kill_grace_s(self) -> float: ...

    def retire(self, path: str) -> None: ...

    def retire_unresponsive(self) -> None: ...


class ServerState(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    DRAINING = "draining"
    STOPPED = "stopped"


class RuntimeServer:
    """See the module docstring."""

    def __init__(
        self,
        invoker: ForwardedInvoker,
        info: ActorConfig,
        capacity: int,
        socket_path: str,
        bounds: FrameBounds,
        *,
        workers: DirectWorkers | None = None,
        max_connections: int = MAX_CONNECTIONS,
        frame_timeout_s: float = FRAME_TIMEOUT_S,
    ) -> None:
        self._invoker = invoker
        self._workers = workers
        self._direct: set[ForwardingConnection] = set()
        """Connections of sidecars that call the workers directly."""
        self._check_handle: asyncio.TimerHandle | None = None
        if workers is not None:
            workers.on_workers = self._workers_changed
        self._info = info
        self._capacity = capacity
        self._path = Path(socket_path)
        self._bounds = bounds
        self._max_connections = max_connections
        self._frame_timeout_s = frame_timeout_s
        self._server: asyncio.Server | None = None
        self._connections: dict[ForwardingConnection, asyncio.Task[None] | None] = {}
        """Each connection served, and the task serving it."""
        self.state = ServerState.STARTING

    async def start(self) -> None:
        _make_private_directory(self._path.parent)
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()  # a socket file left by a killed predecessor
        self._server = await asyncio.start_unix_server(self._accept, path=str(self._path))
        os.chmod(self._path, 0o660)
        self.state = ServerState.RUNNING

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._connections) >= self._max_connections:
            log.warning(
                "runtime connection refused: too many connections",
                extra={"limit": self._max_connections, "socket": str(self._path)},
            )
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            return
        connection = ForwardingConnection(
            reader,
            writer,
            self._invoker,
            self._info,
            self._capacity,
            self._bounds,
            host=self,
            frame_timeout_s=self._frame_timeout_s,
        )
        self._connections[connection] = asyncio.current_task()
        try:
            await connection.serve()
            await connection.drain(0)
        finally:
            self._connections.pop(connection, None)
            await connection.close()
            self._left(connection)

    def offer(self, peer: ForwardingConnection, wanted: bool) -> tuple[list[str], float] | None:
        workers = self._workers
        if not wanted or workers is None or not workers.direct:
            self._direct.discard(peer)
            return None
        if self.state is not ServerState.RUNNING:
            return None  # stopping: it calls here, and is told nothing more
        self._direct.add(peer)
        self._cancel_check()
        return workers.paths, workers.kill_grace_s

    def retire(self, worker: str) -> None:
        if self._workers is not None:
            self._workers.retire(worker)

    def _workers_changed(self) -> None:
        assert self._workers is not None
        if not self._workers.direct:
            # Direct calls were turned off (a worker's socket could not be made): its callers
            # reconnect, and are answered to call here.
            for peer in list(self._direct):
                self._direct.discard(peer)
                peer.hang_up()
            return
        paths = self._workers.paths
        for peer in self._direct:
            peer.announce(paths)

    def _left(self, connection: ForwardingConnection) -> None:
        if connection not in self._direct:
            return
        self._direct.discard(connection)
        if not self._direct and self.state is ServerState.RUNNING and self._workers is not None:
            # A call it left running would run on with nobody to retire it past its timeout:
            # unless a sidecar is back by then (it pings each worker as it joins it, and
            # retires one that does not answer), the workers are pinged then, and each whose
            # loop does not answer is replaced.
            self._cancel_check()
            limit_s = self._info.timeout_s + self._workers.kill_grace_s
            self._check_handle = asyncio.get_running_loop().call_later(
                limit_s, self._check_if_alone
            )

    def _check_if_alone(self) -> None:
        self._check_handle = None
        if not self._direct and self.state is ServerState.RUNNING and self._workers is not None:
            log.info("no sidecar calling the workers since one left; checking them")
            self._workers.retire_unresponsive()

    def _cancel_check(self) -> None:
        if self._check_handle is not None:
            self._check_handle.cancel()
            self._check_handle = None

    async def stop(self, grace_s: float) -> None:
        """Stop accepting, drain, and close the connections of callers through this socket.
        A sidecar calling the workers directly is told (a Drain) and stays connected until
        `close`: the workers' answers still reach it while they finish their calls."""
        if self.state is ServerState.STOPPED:
            return
        self.state = ServerState.DRAINING
        self._cancel_check()
        if self._server is not None:
            self._server.close()
        for peer in self._direct:
            peer.stopping()  # it turns back the calls it holds, and sends no more
        self._invoker.drain()  # calls queued at the workers go back now, untouched
        forwarding = [c for c in self._connections if c not in self._direct]
        await asyncio.gather(*(c.drain(grace_s) for c in forwarding))
        await self._close(forwarding)
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()
        self.state = ServerState.STOPPED

    async def close(self) -> None:
        """After `stop`, once the workers are stopped: close the connections left."""
        await self._close(list(self._connections))

    async def _close(self, connections: list[ForwardingConnection]) -> None:
        tasks = [t for c in connections if (t := self._connections.get(c)) is not None]
        for connection in connections:
            await connection.close()
        await asyncio.gather(*tasks, return_exceptions=True)


def _make_private_directory(path: Path) -> None:
    """Create `path` (and its parents) with mode 0700; leave an existing directory alone."""
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        return
    os.chmod(path, 0o700)  # mkdir's mode is filtered by the umask
