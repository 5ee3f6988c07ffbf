"""A mesh: every actor of an app on one transport, each scaled 0..N by its queue depth.

Declares the queues (actors and end actors), runs the end actors, and polls each actor's depth
to start or retire workers by the KEDA rule of `asya.local.autoscale`. Each worker is a
`Consumer` with its own invoker (a class actor is instantiated once per worker). A worker that
cannot start (its class raises in `__init__`) is fatal for the run: `wait` raises it instead
of waiting for ever on envelopes nobody can process. Works on any transport.

A GPU actor's worker is a `Consumer` too, but its invoker runs the handler in processes of its
own, started with the GPUs `asya.local.gpus` assigns it (or none, on CPU); a worker that finds
no GPU free is not started until one is (the scaler tries again at its next poll).

With `metrics`, every worker and end actor counts on those instruments, as a sidecar does on
its own (`asya.metrics`); a process that serves them (`asya serve`) passes its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import random
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field

from asya import telemetry
from asya.actor import ActorSpec
from asya.clock import Clock
from asya.consumer import Consumer
from asya.crew.ends import EndActor, Sink
from asya.envelope import Limits
from asya.handler import LocalInvoker
from asya.hooks import Hooks, combined
from asya.local.gpus import (
    Assignment,
    GpuMode,
    GpuWorkers,
    StartableInvoker,
    machine_gpus,
    worker_processes,
)
from asya.local.scaler import Scaler
from asya.message_loop import MessageLoop
from asya.metrics import Metrics
from asya.routing import ERROR_END, HAPPY_END
from asya.runtime.workers import ProcessInvoker
from asya.transport.base import Transport

log = logging.getLogger(__name__)


async def wait_unless_fatal(condition: Awaitable[None], fatal: asyncio.Future[None]) -> None:
    """Wait for `condition`; if `fatal` fails first, raise its error instead."""
    waiting = asyncio.ensure_future(condition)
    try:
        await asyncio.wait({waiting, fatal}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
    if fatal.done():
        fatal.result()


class MeshHooks(Hooks):
    """The chain's hooks (`asya.hooks`), told also how many workers each actor has."""

    def on_workers(self, actor: str, workers: int) -> None:
        """`actor` has `workers` workers now (the scaler started or retired one)."""


class SyncHost(enum.Enum):
    """Where the sync handlers of actors without GPUs run; chosen once, for the whole mesh."""

    IN_PROCESS = "in-process"
    """On threads of this process (`asya dev`: breakpoints and prints work); a call past its
    timeout is reported `Timeout`, and its thread, which cannot be stopped, is left running."""
    WORKER_PROCESSES = "worker-processes"
    """In worker processes (`asya serve`, as in pods): a call past its timeout is killed with
    its worker, and the worker replaced."""


@dataclass(frozen=True, kw_only=True)
class MeshOptions:
    limits: Limits = field(default_factory=Limits)
    poll_interval_s: float = 0.05
    """How often queue depths are checked to scale workers."""
    grace_s: float = 5.0
    """How long a retiring worker may take to finish what it holds."""
    gpu_mode: GpuMode = GpuMode.ASSIGN
    """GPU actors in processes of their own with devices assigned, or in-process like others."""
    depth: int = 1
    """Calls queued at each handler slot behind the one it runs (`ASYA_PIPELINE_DEPTH`)."""
    host: SyncHost = SyncHost.IN_PROCESS
    """Where other actors' sync handlers run: on threads here, or in worker processes."""


@dataclass(eq=False)
class _Worker:
    loop: MessageLoop
    consumer: Consumer
    assignment: Assignment | None = None
    """The GPUs it holds (a GPU actor's worker), given back once it has stopped."""


class Mesh:
    """See the module docstring. Use as an async context manager."""

    def __init__(
        self,
        specs: Sequence[ActorSpec],
        *,
        transport: Transport,
        hooks: MeshHooks,
        sink: Sink,
        clock: Clock,
        rng: random.Random,
        options: MeshOptions | None = None,
        ends: bool = True,
        gpus: GpuWorkers | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """`ends=False`: run no end actors (another process consumes `happy-end` and
        `error-end`); their queues are declared all the same, for the actors to publish to.
        `gpus`: how GPU actors get devices and processes; default: this machine's GPUs, read at
        the start (`options.gpu_mode` says whether at all). `metrics`: what the workers and end
        actors count on (None: `hooks` alone hear of each step)."""
        self.specs = tuple(specs)
        self._transport = transport
        self._hooks = hooks
        self._clock = clock
        self._rng = rng
        self._options = options or MeshOptions()
        self._metrics = metrics
        self._ends = [
            EndActor(name, transport=transport, sink=sink, clock=clock, rng=rng, metrics=metrics)
            for name in ((HAPPY_END, ERROR_END) if ends else ())
        ]
        self._scaler = Scaler(
            self.specs,
            transport=transport,
            clock=clock,
            observer=hooks,
            poll_interval_s=self._options.poll_interval_s,
            start=self._start_worker,
            retire=self._retire,
            on_error=self._fail,
        )
        self._gpus = gpus
        self._started: dict[str, int] = {s.name: 0 for s in self.specs}
        self._retiring: set[asyncio.Task[None]] = set()
        self._scaling: asyncio.Task[None] | None = None
        self._fatal: asyncio.Future[None] | None = None

    async def __aenter__(self) -> Mesh:
        """Raises: ActorDefinitionError: a GPU actor could never get its GPUs here."""
        if self._gpus is None:
            self._gpus = machine_gpus(self.specs, self._options.gpu_mode, depth=self._options.depth)
            if self._gpus is not None and self._gpus.assigner.on_cpu:
                fields = {
                    "actors": ",".join(self._gpus.assigner.on_cpu),
                    "gpus": self._gpus.assigner.describe_total(),
                }
                log.warning("GPU actors run on CPU: too few GPUs on this machine", extra=fields)
        self._fatal = asyncio.get_running_loop().create_future()
        for name in (*(s.name for s in self.specs), HAPPY_END, ERROR_END):
            await self._transport.declare(name)
        for end in self._ends:
            await end.start()
        self._scaling = asyncio.create_task(self._scaler.run())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._scaling is not None:
            self._scaling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scaling
        grace = self._options.grace_s
        # All at once: each stops pulling now, and the grace bounds the whole drain, not each.
        await asyncio.gather(*(self._stop(worker) for worker in self._scaler.take_all()))
        await asyncio.gather(*self._retiring, return_exceptions=True)
        for end in self._ends:
            await end.stop(grace)

    def workers(self, actor: str) -> int:
        return self._scaler.workers(actor)

    async def wait(self, condition: Awaitable[None]) -> None:
        """Wait for `condition` (e.g. every envelope final), unless a worker cannot start.

        Raises:
            ActorDefinitionError: a worker could not start.
        """
        assert self._fatal is not None, "use Mesh as an async context manager"
        await wait_unless_fatal(condition, self._fatal)

    def _fail(self, exc: Exception) -> None:
        if self._fatal is not None and not self._fatal.done():
            self._fatal.set_exception(exc)

    def _retire(self, worker: _Worker) -> None:
        retiring = asyncio.create_task(self._stop(worker))
        self._retiring.add(retiring)
        retiring.add_done_callback(self._retiring.discard)

    async def _stop(self, worker: _Worker) -> None:
        try:
            await worker.loop.stop(self._options.grace_s)
            await worker.consumer.aclose()
        finally:
            # Only now: its processes have exited, so the devices are in no one's hands.
            if worker.assignment is not None and self._gpus is not None:
                self._gpus.assigner.release(worker.assignment)

    async def _start_worker(self, spec: ActorSpec) -> _Worker | None:
        """A started worker; None for a GPU actor's worker that must wait for a GPU.

        Raises:
            ActorDefinitionError: the actor's class raised in `__init__`.
        """
        assignment = None
        invoker: StartableInvoker
        if spec.resources.gpus and self._gpus is not None:
            assignment = self._gpus.assigner.assign(spec, self._started[spec.name])
            if assignment is None:
                return None
            invoker = self._gpus.invoker(spec, assignment)
        elif self._options.host is SyncHost.WORKER_PROCESSES and not spec.style.is_async:
            invoker = worker_processes(spec, os.environ, depth=self._options.depth)
        else:
            invoker = LocalInvoker(spec)
        self._started[spec.name] += 1
        try:
            await invoker.start()
        except Exception:
            log.error("worker failed to start", extra={"actor": spec.name})
            if assignment is not None and self._gpus is not None:
                self._gpus.assigner.release(assignment)
            raise
        hooks = combined(self._hooks, tracing=telemetry.installed(), metrics=self._metrics)
        consumer = Consumer(
            spec.config,
            transport=self._transport,
            invoker=invoker,
            limits=self._options.limits,
            clock=self._clock,
            rng=self._rng,
            hooks=hooks,
            # Worker processes check each output before sending it (`asya.runtime.connection`).
            outputs_checked=isinstance(invoker, ProcessInvoker),
        )
        loop = MessageLoop.for_actor(
            self._transport, spec.config, consumer, depth=self._options.depth, hooks=hooks
        )
        await loop.start()
        return _Worker(loop, consumer, assignment)
