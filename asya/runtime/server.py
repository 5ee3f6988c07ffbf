"""RuntimeServer: serve an invoker on a Unix socket, and shut down without losing calls.

Accepts connections (normally one persistent connection from the sidecar; at most
`max_connections`, the rest are closed at once) and serves each with
`asya.runtime.connection.Connection`. The socket's directory, if the server has to create it,
is private to the runtime's user (0700); one that exists (a Kubernetes emptyDir shared with the
sidecar) is left as it is. `stop(grace_s)` stops accepting, answers the calls queued and not
started `NotStarted` (the sidecar gives their envelopes back), lets calls in flight finish
within the grace period, cancels the rest (their envelopes are still unacked at the
sidecar, so the broker redelivers them) and removes the socket file.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
from pathlib import Path
from typing import Final

from asya.actor import ActorConfig
from asya.runtime.connection import ForwardedInvoker, ForwardingConnection
from asya.runtime.frames import FRAME_TIMEOUT_S, FrameBounds

log = logging.getLogger(__name__)

MAX_CONNECTIONS: Final = 4
"""Connections served at once: the sidecar needs one; a few more let a probe or a restarted
sidecar in while an old connection is still closing."""


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
        max_connections: int = MAX_CONNECTIONS,
        frame_timeout_s: float = FRAME_TIMEOUT_S,
    ) -> None:
        self._invoker = invoker
        self._info = info
        self._capacity = capacity
        self._path = Path(socket_path)
        self._bounds = bounds
        self._max_connections = max_connections
        self._frame_timeout_s = frame_timeout_s
        self._server: asyncio.Server | None = None
        self._connections: set[ForwardingConnection] = set()
        self._serving: set[asyncio.Task[None]] = set()
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
            frame_timeout_s=self._frame_timeout_s,
        )
        self._connections.add(connection)
        task = asyncio.current_task()
        if task is not None:
            self._serving.add(task)
        try:
            await connection.serve()
            await connection.drain(0)
        finally:
            self._connections.discard(connection)
            if task is not None:
                self._serving.discard(task)
            await connection.close()

    async def stop(self, grace_s: float) -> None:
        if self.state is ServerState.STOPPED:
            return
        self.state = ServerState.DRAINING
        if self._server is not None:
            self._server.close()
        self._invoker.drain()  # calls queued at the workers go back now, untouched
        await asyncio.gather(*(c.drain(grace_s) for c in list(self._connections)))
        for connection in list(self._connections):
            await connection.close()
        await asyncio.gather(*self._serving, return_exceptions=True)
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()
        self.state = ServerState.STOPPED


def _make_private_directory(path: Path) -> None:
    """Create `path` (and its parents) with mode 0700; leave an existing directory alone."""
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        return
    os.chmod(path, 0o700)  # mkdir's mode is filtered by the umask
