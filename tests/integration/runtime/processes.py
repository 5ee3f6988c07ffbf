"""A runtime process for tests: start `python -m asya.runtime` on a handler module, connect."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from asya.envelope import Envelope, Route
from asya.errors import RuntimeUnavailableError
from asya.runtime.client import RuntimeClient


class Runtime:
    def __init__(self, process: asyncio.subprocess.Process, socket_path: str) -> None:
        self.process = process
        self.socket_path = socket_path

    async def stderr(self) -> str:
        assert self.process.stderr is not None
        return (await self.process.stderr.read()).decode()

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
            await self.process.wait()


async def start_runtime(
    tmp_path: Path, handlers: str, handler: str, *, socket_path: str | None = None, **env: str
) -> Runtime:
    """`handlers` is the source of `handlers_mod`; `handler` is `handlers_mod:attr`."""
    (tmp_path / "handlers_mod.py").write_text(handlers)
    socket_path = socket_path or str(tmp_path / "rt.sock")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "asya.runtime",
        env={
            **os.environ,
            "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "ASYA_HANDLER": handler,
            "ASYA_SOCKET_PATH": socket_path,
            **env,
        },
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    return Runtime(process, socket_path)


async def connect(
    runtime: Runtime, timeout_s: float = 30, *, direct_depth: int | None = None
) -> RuntimeClient:
    """Retry until the runtime listens (it first starts its workers). With `direct_depth`,
    as the sidecar connects: calling the workers on their own sockets."""
    async with asyncio.timeout(timeout_s):
        while True:
            if runtime.process.returncode is not None:
                raise AssertionError(f"runtime exited: {await runtime.stderr()}")
            client = RuntimeClient(runtime.socket_path, direct_depth=direct_depth)
            try:
                await client.connect()
                return client
            except RuntimeUnavailableError:
                await asyncio.sleep(0.05)


def call(payload: object, actor: str = "work") -> list[Envelope]:
    return [Envelope(id="e", route=Route(curr=actor), payload=payload)]


async def wait_until_refusing(rt: Runtime, timeout_s: float = 15) -> None:
    """Wait until the runtime stops accepting connections (it is draining)."""
    async with asyncio.timeout(timeout_s):
        while True:
            try:
                _, writer = await asyncio.open_unix_connection(rt.socket_path)
            except OSError:
                return
            writer.close()
            await asyncio.sleep(0.01)


async def wait_for_file(path: Path, timeout_s: float = 15) -> None:
    async with asyncio.timeout(timeout_s):
        while not path.exists():  # noqa: ASYNC110, ASYNC240 (written by another process)
            await asyncio.sleep(0.01)
