"""`asya dev`: run an app's actors over a file of inputs, in-memory or on a broker.

Checks first that the inputs can be routed at all (`check_run`: a usage error, not one
`error-end` envelope per line), then feeds every input line (see `asya.local.inputs`), lets
the mesh scale and route until every envelope is final, and returns the run's statistics.
Final envelopes go to `emit` as they are recorded; progress lines go to `progress` while the
run lasts.

Only the actors the inputs can reach are started (`reachable_actors`), so an actor off every
route — a GPU actor this machine cannot serve, say — cannot stop the run. Routes are followed
statically; an actor that takes a `Context` may rewrite the route to any actor, so once one
is reachable every actor is.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol

from asya.actor import ActorSpec
from asya.client import Client
from asya.clock import Clock
from asya.envelope import END_LIMITS, Envelope, encode_envelope
from asya.errors import SettingsError, UnknownActorError
from asya.local.discovery import App
from asya.local.gpus import GpuWorkers, machine_gpus
from asya.local.inputs import (
    check_route,
    first_bare_payload,
    is_whole_envelope,
    json_lines,
    parse_line,
)
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


@dataclass(frozen=True)
class RunPlan:
    """What a run starts: the actors it can reach, and how its GPU actors get devices."""

    app: App
    """The app, with only the actors the run can reach."""
    gpus: GpuWorkers | None
    """None where no reachable actor needs a GPU, or GPU actors run in-process."""


MeshFactory = Callable[[RunStats, RunPlan], AbstractAsyncContextManager[RunningMesh]]
"""Builds the mesh a run uses, given the run's statistics (observer and sink) and its plan."""


@dataclass(frozen=True)
class DevResult:
    stats: RunStats
    fed: int
    elapsed_s: float
    actors: tuple[str, ...] = ()
    """The actors the run started (those it could reach), in the app's order."""


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


def reachable_actors(
    app: App, lines: Iterable[bytes], route: Sequence[str] | None
) -> tuple[ActorSpec, ...]:
    """The actors of `app` that envelopes fed from `lines` can reach, in the app's order.

    Those on `route` (else the app's ROUTE) where a line is a bare payload, and those left on
    the route of each line that is a whole envelope; every actor, once one of those takes a
    `Context` (it may send its envelope anywhere by rewriting `route.next`). A line that is
    not JSON reaches none: it goes straight to `error-end`.
    """
    names: set[str] = set()
    bare_route = tuple(route or app.route or ())
    for _, value in json_lines(lines):
        if is_whole_envelope(value):
            names.update(_names_on(value["route"]))
        else:
            names.update(bare_route)
    reached = [s for s in app.specs if s.name in names]
    if any(s.takes_context for s in reached):
        return app.specs
    return tuple(reached)


def _names_on(route: object) -> list[str]:
    """The actor names still ahead on a route as an input line gives it: a list of names, or
    the triplet's `curr` and `next`; none for a route that is neither (the line is bad)."""
    if isinstance(route, dict):
        route = [route.get("curr"), *(route.get("next") or ())]
    if not isinstance(route, list):
        return []
    return [name for name in route if isinstance(name, str)]


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
    on_input: Callable[[str], None] | None = None,
) -> DevResult:
    """Run `app` over `lines` until every envelope is final.

    `transport` defaults to the in-memory one; `mesh` to in-process workers on it. Each line
    is the bytes of one JSON line (see `asya.local.inputs`). `on_input` hears the id of each
    input's envelope, in input order, before it is sent. Only the actors the inputs can reach
    are started (`reachable_actors`). GPU actors this machine cannot serve are refused, or run
    on CPU in `GpuMode.ASSIGN_OR_CPU`, which `progress` hears once.

    Raises:
        SettingsError: the inputs cannot be routed (see `check_run`).
        ActorDefinitionError: an actor could not start, or a reachable GPU actor needs more
            GPUs than this machine has (`GpuMode.ASSIGN`).
        TransportError: the broker failed.
    """
    opts = options or DevOptions()
    check_run(app, lines, opts.route)
    specs = reachable_actors(app, lines, opts.route)
    gpus = machine_gpus(specs, opts.mesh.gpu_mode, depth=opts.mesh.depth)
    if gpus is not None and gpus.assigner.on_cpu:
        progress(_on_cpu_notice(specs, gpus))
    plan = RunPlan(dataclasses.replace(app, specs=specs), gpus)
    used = transport or MemoryTransport()
    stats = RunStats(emit)

    def in_process(stats: RunStats, plan: RunPlan) -> Mesh:
        return Mesh(
            plan.app.specs,
            transport=used,
            hooks=stats,
            sink=stats,
            clock=clock,
            rng=rng,
            options=opts.mesh,
            gpus=plan.gpus,
        )

    run = _Run(plan.app, lines, used, stats, opts, clock, rng, on_input)
    async with (mesh or in_process)(stats, plan) as running:
        reporter = asyncio.create_task(run.report_progress(running, progress))
        try:
            await run.feed_all()
            await running.wait(stats.drained())
        finally:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter
    return DevResult(stats, run.fed, run.elapsed_s(), tuple(s.name for s in specs))


def _on_cpu_notice(specs: Sequence[ActorSpec], gpus: GpuWorkers) -> str:
    on_cpu = [s for s in specs if s.name in gpus.assigner.on_cpu]
    names = ", ".join(f"'{s.name}' (gpus={s.resources.gpus})" for s in on_cpu)
    # An actor that declares cpu_fallback runs on CPU under --strict-gpus too.
    strict = any(not s.cpu_fallback for s in on_cpu)
    return (
        f"asya: GPU actor(s) {names} run on CPU, every GPU hidden: this machine has"
        f" {gpus.assigner.describe_total()}"
        + (" (--strict-gpus stops the run instead)" if strict else "")
    )


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
        on_input: Callable[[str], None] | None,
    ) -> None:
        self.lines = lines
        self._on_input = on_input
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
            if self._on_input is not None:
                self._on_input(item.id if isinstance(item, Envelope) else item.envelope.id)
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
