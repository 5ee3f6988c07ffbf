"""`asya dev --isolate`: every actor as in a pod — a runtime process and a sidecar process.

The runner keeps the end actors in-process (it records the finals) and the broker topology;
each actor gets `python -m asya.runtime` and `asya-sidecar`, wired exactly as the operator
wires a pod: the handler reference, a Unix socket between them, the broker. The sidecars
print a JSON line per finished step (`ASYA_STEP_EVENTS`), which is how the run knows when it
is over. A process that exits on its own is fatal for the run; leaving the context stops
sidecars first (they drain), then runtimes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import sys
from collections.abc import Awaitable, Mapping
from pathlib import Path

from asya.clock import Clock
from asya.consumer import StepResult
from asya.crew.ends import EndActor, Sink
from asya.errors import ActorDefinitionError
from asya.local.discovery import App
from asya.local.mesh import WorkerObserver, wait_unless_fatal
from asya.routing import ERROR_END, HAPPY_END
from asya.settings import env_var
from asya.transport.base import Transport

log = logging.getLogger(__name__)


class IsolatedMesh:
    """See the module docstring. Use as an async context manager."""

    def __init__(
        self,
        app: App,
        *,
        transport: Transport,
        broker_url: str,
        namespace: str,
        observer: WorkerObserver,
        sink: Sink,
        workdir: Path,
        env: Mapping[str, str],
        clock: Clock,
        rng: random.Random,
    ) -> None:
        self._app = app
        self._transport = transport
        self._observer = observer
        self._workdir = workdir
        self._ends = [
            EndActor(name, transport=transport, sink=sink, clock=clock, rng=rng)
            for name in (HAPPY_END, ERROR_END)
        ]
        path = os.pathsep.join(p for p in (app.search_path, env.get("PYTHONPATH")) if p)
        self._env = {
            **env,
            "PYTHONPATH": path,
            env_var("broker_url"): broker_url,
            env_var("namespace"): namespace,
            env_var("health_port"): "0",
            env_var("step_events"): "true",
        }
        self._processes: dict[str, asyncio.subprocess.Process] = {}
        self._readers: list[asyncio.Task[None]] = []
        self._fatal: asyncio.Future[None] | None = None
        self._stopping = False

    def workers(self, actor: str) -> int:
        process = self._processes.get(f"{actor}/sidecar")
        return 1 if process is not None and process.returncode is None else 0

    async def __aenter__(self) -> IsolatedMesh:
        self._fatal = asyncio.get_running_loop().create_future()
        for name in (*(s.name for s in self._app.specs), HAPPY_END, ERROR_END):
            await self._transport.declare(name)
        for end in self._ends:
            await end.start()
        for spec in self._app.specs:
            socket_path = str(self._workdir / f"{spec.name}.sock")
            common = {**self._env, env_var("socket_path"): socket_path}
            await self._spawn(
                f"{spec.name}/runtime",
                ["-m", "asya.runtime"],
                {**common, env_var("handler"): spec.ref},
            )
            await self._spawn(
                f"{spec.name}/sidecar",
                ["-m", "asya_sidecar.main"],
                {**common, env_var("actor"): spec.name},
                events=True,
            )
            self._observer.on_workers(spec.name, 1)
        return self

    async def _spawn(
        self, name: str, args: list[str], env: dict[str, str], *, events: bool = False
    ) -> None:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *args,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE if events else None,
        )
        self._processes[name] = process
        self._readers.append(asyncio.create_task(self._watch(name, process, events=events)))

    async def _watch(self, name: str, process: asyncio.subprocess.Process, *, events: bool) -> None:
        if events and process.stdout is not None:
            async for line in process.stdout:
                self._on_line(line)
        code = await process.wait()
        if not self._stopping and self._fatal is not None and not self._fatal.done():
            self._fatal.set_exception(
                ActorDefinitionError(f"{name} exited with code {code} (see its output above)")
            )

    def _on_line(self, line: bytes) -> None:
        try:
            event = json.loads(line)
            self._observer.on_step(
                event["actor"], StepResult(event["result"]), event["duration_s"], event["outputs"]
            )
        except (ValueError, KeyError, TypeError):
            sys.stdout.write(line.decode(errors="replace"))

    async def wait(self, condition: Awaitable[None]) -> None:
        """Wait for `condition`, unless one of the processes dies.

        Raises:
            ActorDefinitionError: a runtime or sidecar exited on its own.
        """
        assert self._fatal is not None, "use IsolatedMesh as an async context manager"
        await wait_unless_fatal(condition, self._fatal)

    async def __aexit__(self, *exc_info: object) -> None:
        self._stopping = True
        for role in ("sidecar", "runtime"):
            group = [
                p for n, p in self._processes.items() if n.endswith(role) and p.returncode is None
            ]
            for process in group:
                process.terminate()
            for process in group:
                try:
                    await asyncio.wait_for(process.wait(), 30)
                except TimeoutError:
                    process.kill()
                    await process.wait()
        await asyncio.gather(*self._readers, return_exceptions=True)
        for end in self._ends:
            await end.stop(5)
