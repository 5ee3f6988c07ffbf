"""Scaler: keeps each actor's workers at the count KEDA's rule gives for its queue depth.

The loop both local meshes share: poll every actor's queue depth, ask the pure rule of
`asya.local.autoscale` how many replicas that is, start or retire workers to match, and tell
the observer. What a worker *is* — an in-process `Consumer` (`asya.local.mesh`) or a runtime
and sidecar pair of processes (`asya.local.isolate`) — is the caller's: it passes how to start
one and how to retire one; `start` may answer None, "not now" (a GPU actor's worker waiting for
a GPU), and the scaler tries again at its next poll. An error while scaling (a worker that
cannot start, a broker that fails) ends the loop and is handed to `on_error`: the run cannot
go on without its workers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, Protocol, TypeVar

from asya.actor import ActorSpec
from asya.clock import Clock
from asya.local.autoscale import ScaleState, next_scale
from asya.transport.base import Transport

W = TypeVar("W")


class WorkerCounter(Protocol):
    def on_workers(self, actor: str, workers: int) -> None: ...


class Scaler(Generic[W]):
    """See the module docstring; `run()` is the loop, owned (and cancelled) by the mesh."""

    def __init__(
        self,
        specs: Sequence[ActorSpec],
        *,
        transport: Transport,
        clock: Clock,
        observer: WorkerCounter,
        poll_interval_s: float,
        start: Callable[[ActorSpec], Awaitable[W | None]],
        retire: Callable[[W], None],
        on_error: Callable[[Exception], None],
    ) -> None:
        self._specs = tuple(specs)
        self._transport = transport
        self._clock = clock
        self._observer = observer
        self._poll_interval_s = poll_interval_s
        self._start = start
        self._retire = retire
        self._on_error = on_error
        self._workers: dict[str, list[W]] = {s.name: [] for s in self._specs}
        self._scale: dict[str, ScaleState] = {s.name: ScaleState(0) for s in self._specs}

    def workers(self, actor: str) -> int:
        return len(self._workers[actor])

    def take_all(self) -> list[W]:
        """Every running worker, which the scaler forgets (for the mesh to stop)."""
        taken = [w for workers in self._workers.values() for w in workers]
        for workers in self._workers.values():
            workers.clear()
        return taken

    async def run(self) -> None:
        try:
            while True:
                for spec in self._specs:
                    await self._rescale(spec)
                await asyncio.sleep(self._poll_interval_s)
        except Exception as exc:  # a worker that cannot start, a broker that fails
            self._on_error(exc)

    async def _rescale(self, spec: ActorSpec) -> None:
        depth = await self._transport.depth(spec.name)
        state = next_scale(
            spec.scaling, self._scale[spec.name], depth.total, self._clock.monotonic()
        )
        self._scale[spec.name] = state
        workers = self._workers[spec.name]
        while len(workers) < state.replicas:
            worker = await self._start(spec)
            if worker is None:  # it waits (for a GPU); the next poll tries again
                break
            workers.append(worker)
        while len(workers) > state.replicas:
            self._retire(workers.pop())
        self._observer.on_workers(spec.name, len(workers))
