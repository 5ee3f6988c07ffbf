"""A mesh: every actor of an app on one transport, each scaled 0..N by its queue depth.

Declares the queues (actors and end actors), runs the end actors, and polls each actor's depth
to start or retire workers by the KEDA rule of `asya.local.autoscale`. Each worker is a
`Consumer` with its own invoker (a class actor is instantiated once per worker). A worker that
cannot start (its class raises in `__init__`) is fatal for the run: `wait` raises it instead
of waiting for ever on envelopes nobody can process. Works on any transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from asya.actor import ActorSpec
from asya.clock import Clock
from asya.consumer import Consumer, ConsumerConfig, Observer
from asya.crew.ends import EndActor, Sink
from asya.envelope import Limits
from asya.handler import LocalInvoker
from asya.local.autoscale import ScaleState, next_scale
from asya.routing import ERROR_END, HAPPY_END
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


class WorkerObserver(Observer, Protocol):
    def on_workers(self, actor: str, workers: int) -> None: ...


@dataclass(frozen=True, kw_only=True)
class MeshOptions:
    limits: Limits = field(default_factory=Limits)
    poll_interval_s: float = 0.05
    """How often queue depths are checked to scale workers."""
    grace_s: float = 5.0
    """How long a retiring worker may take to finish what it holds."""


class Mesh:
    """See the module docstring. Use as an async context manager."""

    def __init__(
        self,
        specs: Sequence[ActorSpec],
        *,
        transport: Transport,
        observer: WorkerObserver,
        sink: Sink,
        clock: Clock,
        rng: random.Random,
        options: MeshOptions | None = None,
    ) -> None:
        self.specs = tuple(specs)
        self._transport = transport
        self._observer = observer
        self._clock = clock
        self._rng = rng
        self._options = options or MeshOptions()
        self._ends = [
            EndActor(name, transport=transport, sink=sink, clock=clock, rng=rng)
            for name in (HAPPY_END, ERROR_END)
        ]
        self._workers: dict[str, list[Consumer]] = {s.name: [] for s in self.specs}
        self._scale: dict[str, ScaleState] = {s.name: ScaleState(0) for s in self.specs}
        self._retiring: set[asyncio.Task[None]] = set()
        self._scaler: asyncio.Task[None] | None = None
        self._fatal: asyncio.Future[None] | None = None

    async def __aenter__(self) -> Mesh:
        self._fatal = asyncio.get_running_loop().create_future()
        for name in (*self._workers, HAPPY_END, ERROR_END):
            await self._transport.declare(name)
        for end in self._ends:
            await end.start()
        self._scaler = asyncio.create_task(self._run_scaler())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._scaler is not None:
            self._scaler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scaler
        grace = self._options.grace_s
        for workers in self._workers.values():
            for worker in workers:
                await worker.stop(grace)
            workers.clear()
        await asyncio.gather(*self._retiring, return_exceptions=True)
        for end in self._ends:
            await end.stop(grace)

    def workers(self, actor: str) -> int:
        return len(self._workers[actor])

    async def wait(self, condition: Awaitable[None]) -> None:
        """Wait for `condition` (e.g. every envelope final), unless a worker cannot start.

        Raises:
            ActorDefinitionError: a worker could not start.
        """
        assert self._fatal is not None, "use Mesh as an async context manager"
        await wait_unless_fatal(condition, self._fatal)

    async def _run_scaler(self) -> None:
        while True:
            for spec in self.specs:
                await self._rescale(spec)
            await asyncio.sleep(self._options.poll_interval_s)

    async def _rescale(self, spec: ActorSpec) -> None:
        depth = await self._transport.depth(spec.name)
        state = next_scale(
            spec.scaling, self._scale[spec.name], depth.total, self._clock.monotonic()
        )
        self._scale[spec.name] = state
        workers = self._workers[spec.name]
        while len(workers) < state.replicas:
            worker = await self._start_worker(spec)
            if worker is None:
                return
            workers.append(worker)
        while len(workers) > state.replicas:
            retiring = asyncio.create_task(workers.pop().stop(self._options.grace_s))
            self._retiring.add(retiring)
            retiring.add_done_callback(self._retiring.discard)
        self._observer.on_workers(spec.name, len(workers))

    async def _start_worker(self, spec: ActorSpec) -> Consumer | None:
        invoker = LocalInvoker(spec)
        try:
            await invoker.start()
        except Exception as exc:
            log.error("worker failed to start", extra={"actor": spec.name})
            if self._fatal is not None and not self._fatal.done():
                self._fatal.set_exception(exc)
            return None
        worker = Consumer(
            ConsumerConfig.from_spec(spec),
            transport=self._transport,
            invoker=invoker,
            limits=self._options.limits,
            clock=self._clock,
            rng=self._rng,
            observer=self._observer,
        )
        await worker.start()
        return worker
