"""Liveness and readiness over HTTP: `GET /healthz` and `GET /readyz`, and `GET /metrics`.

Two fixed answers for the kubelet's (or docker compose's) probes: 200 when the check passes,
503 when it does not, 404 for anything else; and, when the process has metrics, their
Prometheus text exposition; and, when it has one, its state as JSON on `GET /status`. Small
enough that a web framework would be the larger risk. Shared by the two long-running
processes, `asya-sidecar` and `asya serve`: each passes its own checks; this module knows
nothing of what is checked.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

Check = Callable[[], bool]
Exposition = Callable[[], bytes]
"""The process's metrics in Prometheus' text format (`prometheus_client.generate_latest`)."""
StatusJSON = Callable[[], Awaitable[bytes]]
"""The process's state as a JSON document (`asya serve`'s: `asya.status.ServeStatus`)."""

_REASONS = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}
_TEXT = "text/plain"
_PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
_JSON = "application/json"


class HealthServer:
    """Answers probes on `port` (0 picks a free one; see `port` after start)."""

    def __init__(
        self,
        port: int,
        *,
        live: Check,
        ready: Check,
        metrics: Exposition | None = None,
        status: StatusJSON | None = None,
    ) -> None:
        self._port = port
        self._checks = {"/healthz": live, "/readyz": ready}
        self._metrics = metrics
        self._status = status
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
            path = parts[1] if len(parts) >= 2 and parts[0] == "GET" else None
            if path == "/status" and self._status is not None:
                status, content_type, body = 200, _JSON, await self._status()
            else:
                status, content_type, body = self._response(path)
            writer.write(
                f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
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

    def _response(self, path: str | None) -> tuple[int, str, bytes]:
        if path == "/metrics" and self._metrics is not None:
            return 200, _PROMETHEUS_TEXT, self._metrics()
        check = self._checks.get(path) if path is not None else None
        status = 404 if check is None else 200 if check() else 503
        return status, _TEXT, _REASONS[status].lower().encode() + b"\n"
