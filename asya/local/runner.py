"""`asya dev`: run an app's actors over a file of inputs, in-memory or on a broker.

Checks first that the inputs can be routed at all (`check_run`: a usage error, not one
`error-end` envelope per line), then feeds every input line (see `asya.local.inputs`), lets
the mesh scale and route until every envelope is final, and returns the run's statistics.
Final envelopes go to `emit` as they are recorded; progress lines go to `progress` while the
run lasts.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol

from asya.client import Client
from asya.clock import Clock
from asya.envelope import END_LIMITS, Envelope, encode_envelope
from asya.errors import SettingsError, UnknownActorError
from asya.local.discovery import App
from asya.local.inputs import check_route, first_bare_payload, parse_line
from asya.local.mesh import Mesh, MeshOptions
from asya.local.report import RunStats
from asya.routing import ERROR_END, Delivery, plan_unknown_actor
from asya.transport.base import Transport
from asya.transport.memory import MemoryTransport


@dataclass(frozen=True, kw_only=True)
class DevOptions:
    route: tuple[str, ...] | None = None
    """Route for bare payloads; defaults to the app's ROUTE."""
    mesh: MeshOptions = field(default_factory=MeshOptions)
    progress_interval_s: float = 2.0
    """Seconds between progress lines; the first comes after one interval."""


class RunningMesh(Protocol):
    """What the runner needs of a running mesh (in-process or isolated)."""

    def workers(self, actor: str) -> int: ...

    async def wait(self, condition: Awaitable[None]) -> None: ...


MeshFactory = Callable[[RunStats], AbstractAsyncContextManager[RunningMesh]]
"""Builds the mesh a run uses, given the run's statistics (observer and sink)."""


@dataclass(frozen=True)
class DevResult:
    stats: RunStats
    fed: int
    elapsed_s: float


def check_run(app: App, lines: Sequence[bytes], route: Sequence[str] | None) -> None:
    """Fail before anything starts if the inputs cannot be routed.

    `route` is the one given for bare payloads (`--route`); without it, the app's ROUTE.

    Raises:
        SettingsError: `route` names an actor the app does not define, or a line is a bare
            payload and there is no route at all.
    """
    if route:
        check_route(route, (s.name for s in app.specs), option="--route")
        return
    if app.route:
        return
    line_no = first_bare_payload(lines)
    if line_no is not None:
        raise SettingsError(
            f"input line {line_no} is a bare payload and there is no route for it: pass"
            " --route a,b,c, declare ROUTE = [...] in the app, or give each line as an"
            ' envelope with its own route ({"route": ["a", "b"], "payload": ...})',
            variable="--route",
            value=None,
        )


async def run_dev(
    app: App,
    lines: Sequence[bytes],
    *,
    emit: Callable[[Envelope], Awaitable[None]],
    progress: Callable[[str], None],
    clock: Clock,
    rng: random.Random,
    options: DevOptions | None = None,
    transport: Transport | None = None,
    mesh: MeshFactory | None = None,
) -> DevResult:
    """Run `app` over `lines` until every envelope is final.

    `transport` defaults to the in-memory one; `mesh` to in-process workers on it. Each line
    is the bytes of one JSON line (see `asya.local.inputs`).

    Raises:
        SettingsError: the inputs cannot be routed (see `check_run`).
        ActorDefinitionError: an actor could not start.
        TransportError: the broker failed.
    """
    opts = options or DevOptions()
    check_run(app, lines, opts.route)
    used = transport or MemoryTransport()
    stats = RunStats(emit)

    def in_process(stats: RunStats) -> Mesh:
        return Mesh(
            app.specs,
            transport=used,
            hooks=stats,
            sink=stats,
            clock=clock,
            rng=rng,
            options=opts.mesh,
        )

    run = _Run(app, lines, used, stats, opts, clock, rng)
    async with (mesh or in_process)(stats) as running:
        reporter = asyncio.create_task(run.report_progress(running, progress))
        try:
            await run.feed_all()
            await running.wait(stats.drained())
        finally:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter
    return DevResult(stats, run.fed, run.elapsed_s())


class _Run:
    """One run's inputs: puts them into the mesh (counted for completion) and says how far."""

    def __init__(
        self,
        app: App,
        lines: Sequence[bytes],
        transport: Transport,
        stats: RunStats,
        opts: DevOptions,
        clock: Clock,
        rng: random.Random,
    ) -> None:
        self.lines = lines
        self.fed = 0
        self._actors = [s.name for s in app.specs]
        self._progress_every_s = opts.progress_interval_s
        self._started = clock.monotonic()
        self._route = opts.route or app.route
        self._transport = transport
        self._stats = stats
        self._limits = opts.mesh.limits
        self._clock = clock
        self._rng = rng
        self._client = Client(transport, limits=opts.mesh.limits, clock=clock, rng=rng)

    async def feed_all(self) -> None:
        for line_no, line in enumerate(self.lines, start=1):
            if not line.strip():
                continue
            item = parse_line(
                line,
                line_no=line_no,
                route=self._route,
                limits=self._limits,
                now=self._clock.now(),
                rng=self._rng,
            )
            self._stats.on_fed()
            await _feed(self._client, self._transport, item, self._clock)
            self.fed += 1

    def elapsed_s(self) -> float:
        return self._clock.monotonic() - self._started

    async def report_progress(self, running: RunningMesh, say: Callable[[str], None]) -> None:
        while True:
            await asyncio.sleep(self._progress_every_s)
            workers = " ".join(f"{name}={running.workers(name)}" for name in self._actors)
            elapsed = self.elapsed_s()
            say(
                f"[{elapsed:6.1f}s] fed {self.fed}/{len(self.lines)} · finished"
                f" {self._stats.finished} ({self._stats.failed} failed) · workers {workers}"
            )


async def _feed(
    client: Client, transport: Transport, item: Envelope | Delivery, clock: Clock
) -> None:
    if isinstance(item, Envelope):
        try:
            await client.publish(item)
            return
        except UnknownActorError as exc:
            message = f"no actor named '{exc.actor}' (it has no queue); check the route"
            item = plan_unknown_actor(Delivery(exc.actor, item), message, clock.now())
    await transport.publish(ERROR_END, encode_envelope(item.envelope, END_LIMITS))
