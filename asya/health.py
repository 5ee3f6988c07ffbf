"""Liveness and readiness over HTTP: `GET /healthz` and `GET /readyz`.

Two fixed answers for the kubelet's (or docker compose's) probes: 200 when the check passes,
503 when it does not, 404 for anything else. Small enough that a web framework would be the
larger risk. Shared by the two long-running processes, `asya-sidecar` and `asya serve`: each
passes its own checks; this module knows nothing of what is checked.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

Check = Callable[[], bool]

_REASONS = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}


class HealthServer:
    """Answers probes on `port` (0 picks a free one; see `port` after start)."""

    def __init__(self, port: int, *, live: Check, ready: Check) -> None:
        self._port = port
        self._checks = {"/healthz": live, "/readyz": ready}
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        # All interfaces: probes come from the kubelet, not from inside the pod.
        self._server = await asyncio.start_server(self._answer, "0.0.0.0", self._port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), 5)
            parts = request.decode("latin-1").split()
            check = self._checks.get(parts[1]) if len(parts) >= 2 and parts[0] == "GET" else None
            status = 404 if check is None else 200 if check() else 503
            body = _REASONS[status].lower().encode() + b"\n"
            writer.write(
                f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: text/plain\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
