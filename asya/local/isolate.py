"""`asya dev --isolate`: every actor as in a pod — a runtime process and a sidecar process.

The runner keeps the end actors in-process (it records the finals) and the broker topology;
each worker of an actor is a pair of `python -m asya.runtime` and `asya-sidecar`, wired as
the operator wires a pod: the handler reference and a Unix socket of its own between them,
and the broker for the sidecar only (the runtime runs user code: it gets no broker URL or
credentials). Pairs are started and retired by the KEDA rule of `asya.local.autoscale` on
the queue depth, as `asya.local.mesh` does with in-process workers. The sidecars print a
JSON line per finished step (`ASYA_STEP_EVENTS`), which is how the run knows when it is over.

A GPU actor's runtime gets `CUDA_VISIBLE_DEVICES` from `asya.local.gpus` (its sidecar needs no
GPU); a pair that finds no GPU free is not started until one is, and its devices are given back
only once both processes have exited.

A process that exits on its own is fatal for the run. A pair is retired sidecar first (it
drains, and gives back what it cannot finish), then its runtime; a process that outlives
its bound after SIGTERM is killed, so stopping never hangs on one that ignores SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import sys
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from asya.actor import ActorSpec
from asya.clock import Clock
from asya.crew.ends import EndActor, Sink
from asya.errors import ActorDefinitionError
from asya.hooks import StepResult
from asya.local.discovery import App
from asya.local.gpus import Assignment, GpuAssigner, machine_gpus
from asya.local.mesh import MeshHooks, MeshOptions, wait_unless_fatal
from asya.local.scaler import Scaler
from asya.routing import ERROR_END, HAPPY_END
from asya.runtime.workers import user_environment
from asya.settings import env_var
from asya.transport.base import Transport

log = logging.getLogger(__name__)

KILL_AFTER_FATAL_S = 1.0
"""How long a process may take to exit on SIGTERM once the run has failed: nothing to drain."""
KILL_MARGIN_S = 2.0
"""Time past the drain grace before a process that has not exited is killed."""


@dataclass(eq=False)
class _Pair:
    """One worker of an actor: its runtime and its sidecar."""

    actor: str
    index: int
    runtime: asyncio.subprocess.Process
    sidecar: asyncio.subprocess.Process
    assignment: Assignment | None = None
    retiring: bool = False
    watchers: list[asyncio.Task[None]] = field(default_factory=list)


class IsolatedMesh:
    """See the module docstring. Use as an async context manager."""

    def __init__(
        self,
        app: App,
        *,
        transport: Transport,
        broker_url: str,
        namespace: str,
        hooks: MeshHooks,
        sink: Sink,
        workdir: Path,
        env: Mapping[str, str],
        clock: Clock,
        rng: random.Random,
        options: MeshOptions | None = None,
        gpus: GpuAssigner | None = None,
    ) -> None:
        """`gpus` assigns GPU actors' devices; default: from this machine's GPUs, read at the
        start."""
        self._app = app
        self._env = env
        self._gpus = gpus
        self._transport = transport
        self._hooks = hooks
        self._workdir = workdir
        self._clock = clock
        self._options = options or MeshOptions()
        self._ends = [
            EndActor(name, transport=transport, sink=sink, clock=clock, rng=rng)
            for name in (HAPPY_END, ERROR_END)
        ]
        path = os.pathsep.join(p for p in (app.search_path, env.get("PYTHONPATH")) if p)
        grace = str(self._options.grace_s)
        self._runtime_env = {
            **user_environment(env),  # the runtime runs user code: no broker secrets
            "PYTHONPATH": path,
            env_var("grace_s"): grace,
        }
        self._sidecar_env = {
            **env,
            "PYTHONPATH": path,
            env_var("grace_s"): grace,
            env_var("broker_url"): broker_url,
            env_var("namespace"): namespace,
            env_var("health_port"): "0",
            env_var("step_events"): "true",
        }
        self._scaler = Scaler(
            app.specs,
            transport=transport,
            clock=clock,
            observer=hooks,
            poll_interval_s=self._options.poll_interval_s,
            start=self._start_pair,
            retire=self._retire,
            on_error=self._fail,
        )
        self._started: dict[str, int] = {s.name: 0 for s in app.specs}
        self._spawned: list[asyncio.subprocess.Process] = []
        self._retiring: set[asyncio.Task[None]] = set()
        self._scaling: asyncio.Task[None] | None = None
        self._fatal: asyncio.Future[None] | None = None
        self._stopping = False

    def workers(self, actor: str) -> int:
        return self._scaler.workers(actor)

    async def __aenter__(self) -> IsolatedMesh:
        """Raises: ActorDefinitionError: a GPU actor could never get its GPUs here."""
        if self._gpus is None:
            machine = machine_gpus(self._app.specs, self._options.gpu_mode, env=self._env)
            self._gpus = machine.assigner if machine is not None else None
        self._fatal = asyncio.get_running_loop().create_future()
        for name in (*(s.name for s in self._app.specs), HAPPY_END, ERROR_END):
            await self._transport.declare(name)
        for end in self._ends:
            await end.start()
        self._scaling = asyncio.create_task(self._scaler.run())
        return self

    async def wait(self, condition: Awaitable[None]) -> None:
        """Wait for `condition`, unless one of the processes dies.

        Raises:
            ActorDefinitionError: a runtime or sidecar exited on its own.
        """
        assert self._fatal is not None, "use IsolatedMesh as an async context manager"
        await wait_unless_fatal(condition, self._fatal)

    async def __aexit__(self, *exc_info: object) -> None:
        self._stopping = True
        if self._scaling is not None:
            self._scaling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scaling
        for pair in self._scaler.take_all():
            self._retire(pair)
        # Each retirement is bounded (it ends in SIGKILL), so this wait is too.
        await asyncio.gather(*self._retiring, return_exceptions=True)
        # A pair the scaler was starting when it was cancelled is not among its workers.
        await asyncio.gather(*(_stop_process(p, KILL_AFTER_FATAL_S) for p in self._spawned))
        for end in self._ends:
            await end.stop(self._options.grace_s)
        if self._fatal is not None and self._fatal.done():
            self._fatal.exception()  # raised by `wait`, or superseded by why the run ended

    async def _start_pair(self, spec: ActorSpec) -> _Pair | None:
        index = self._started[spec.name]
        devices: dict[str, str] = {}
        assignment = None
        if spec.resources.gpus and self._gpus is not None:
            assignment = self._gpus.assign(spec, index)
            if assignment is None:
                return None  # it waits for a GPU; the scaler tries again at its next poll
            devices = assignment.environment()
        self._started[spec.name] += 1
        socket = {env_var("socket_path"): str(self._workdir / f"{spec.name}-{index}.sock")}
        runtime = await self._spawn(
            ["-m", "asya.runtime"],
            {**self._runtime_env, **socket, env_var("handler"): spec.ref, **devices},
            events=False,
        )
        sidecar = await self._spawn(
            ["-m", "asya_sidecar.main"],
            {**self._sidecar_env, **socket, env_var("actor"): spec.name},
            events=True,
        )
        pair = _Pair(spec.name, index, runtime, sidecar, assignment)
        pair.watchers = [
            asyncio.create_task(self._watch(pair, "runtime", runtime)),
            asyncio.create_task(self._watch(pair, "sidecar", sidecar)),
        ]
        return pair

    async def _spawn(
        self, args: list[str], env: dict[str, str], *, events: bool
    ) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *args,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE if events else None,
        )
        self._spawned.append(process)
        return process

    async def _watch(self, pair: _Pair, role: str, process: asyncio.subprocess.Process) -> None:
        if process.stdout is not None:
            async for line in process.stdout:
                self._on_line(line)
        code = await process.wait()
        if pair.retiring or self._stopping:
            return
        self._fail(
            ActorDefinitionError(
                f"{pair.actor}/{role} (worker {pair.index}) exited with code {code}"
                " (see its output above)",
                actor=pair.actor,
            )
        )

    def _fail(self, exc: Exception) -> None:
        if self._fatal is not None and not self._fatal.done():
            self._fatal.set_exception(exc)

    def _on_line(self, line: bytes) -> None:
        try:
            event = json.loads(line)
            self._hooks.stepped(
                event["actor"],
                StepResult(event["result"]),
                event.get("reason", ""),
                event["duration_s"],
                event["outputs"],
            )
        except (ValueError, KeyError, TypeError):
            # Not a step event: the sidecar's stdout is no place for the run's finals.
            sys.stderr.write(line.decode(errors="replace"))

    def _retire(self, pair: _Pair) -> None:
        pair.retiring = True
        task = asyncio.create_task(self._stop_pair(pair))
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def _stop_pair(self, pair: _Pair) -> None:
        failed = self._fatal is not None and self._fatal.done()
        bound_s = KILL_AFTER_FATAL_S if failed else self._options.grace_s + KILL_MARGIN_S
        # Sidecar first: it stops consuming and drains through the runtime, which must still
        # be there to answer.
        await _stop_process(pair.sidecar, bound_s)
        await _stop_process(pair.runtime, bound_s)
        await asyncio.gather(*pair.watchers, return_exceptions=True)
        if pair.assignment is not None and self._gpus is not None:
            self._gpus.release(pair.assignment)


async def _stop_process(process: asyncio.subprocess.Process, bound_s: float) -> None:
    """SIGTERM, and SIGKILL if it has not exited within `bound_s`."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
    try:
        await asyncio.wait_for(process.wait(), bound_s)
    except TimeoutError:
        log.warning("process ignored SIGTERM; killing it", extra={"pid": process.pid})
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
