"""RuntimeServer: serve an invoker on a Unix socket, and shut down without losing calls.

Accepts connections (normally one persistent connection from the sidecar) and serves each with
`asya.runtime.connection.Connection`. `stop(grace_s)` stops accepting, lets calls in flight
finish within the grace period, cancels the rest (their envelopes are still unacked at the
sidecar, so the broker redelivers them) and removes the socket file.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
from pathlib import Path

from asya.handler import Invoker
from asya.runtime.connection import Connection
from asya.runtime.frames import ActorInfo


class ServerState(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    DRAINING = "draining"
    STOPPED = "stopped"


class RuntimeServer:
    """See the module docstring."""

    def __init__(self, invoker: Invoker, info: ActorInfo, capacity: int, socket_path: str) -> None:
        self._invoker = invoker
        self._info = info
        self._capacity = capacity
        self._path = Path(socket_path)
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()
        self._serving: set[asyncio.Task[None]] = set()
        self.state = ServerState.STARTING

    async def start(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()  # a socket file left by a killed predecessor
        self._server = await asyncio.start_unix_server(self._accept, path=str(self._path))
        os.chmod(self._path, 0o660)
        self.state = ServerState.RUNNING

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = Connection(reader, writer, self._invoker, self._info, self._capacity)
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
        await asyncio.gather(*(c.drain(grace_s) for c in list(self._connections)))
        for connection in list(self._connections):
            await connection.close()
        await asyncio.gather(*self._serving, return_exceptions=True)
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()
        self.state = ServerState.STOPPED
