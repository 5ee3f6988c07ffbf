"""`asya serve`'s service: an app's actors as long-lived consumers in one process.

Connects to the broker (retrying with backoff, one line per failure, until it answers or the
service is told to stop), then runs a `Mesh` — the same queue-depth scaling as `asya dev` —
until `stop` is set, and drains it: scaling stops, every worker stops pulling at once, what is
in flight gets the mesh's grace to finish, and the rest goes back to its queue for another
process (or the next start) to take. Nothing here deletes a queue: the namespace is shared.

Counts are bounded (one counter per actor, never one entry per envelope), since a service runs
for weeks; `format_status` renders them as the one line printed every `status_every_s`, and
`status_json` as the `GET /status` answer `asya status --from` reads (`asya.status.ServeStatus`).
The probes' checks are `is_live` and `is_ready`; the HTTP side is `asya.health`.
Called by `asya.cli.serve`; reads no environment and installs no signal handler.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from asya.actor import ActorSpec
from asya.clock import Clock
from asya.crew.sinks import LogSink
from asya.envelope import Envelope, Phase
from asya.errors import TransportError
from asya.gpu import read_inventory
from asya.hooks import StepResult
from asya.local.inputs import check_route
from asya.local.mesh import Mesh, MeshHooks, MeshOptions
from asya.metrics import Metrics
from asya.routing import ERROR_END, HAPPY_END
from asya.status import ActorActivity, ServeStatus
from asya.transport.base import Transport
from asya.transport.connecting import connect_until_stopped


class ServeState(enum.Enum):
    STARTING = "starting"
    """Reaching the broker, declaring queues."""
    RUNNING = "running"
    DRAINING = "draining"
    """Told to stop: in-flight work finishing, the rest going back to the queues."""
    STOPPED = "stopped"


@dataclass(frozen=True, kw_only=True)
class ServeOptions:
    mesh: MeshOptions = field(default_factory=MeshOptions)
    """Limits, scaling poll interval and the drain's grace (`ASYA_GRACE_S` from the CLI)."""
    ends: bool = True
    """Run `happy-end` and `error-end` here too; several services may (competing consumers)."""
    status_every_s: float = 30.0
    """Seconds between status lines; 0 = none."""


def select_actors(specs: Sequence[ActorSpec], names: Sequence[str] | None) -> tuple[ActorSpec, ...]:
    """The specs named by `names` (`--actors`), in the app's order; all of them for None.

    Raises:
        SettingsError: a name is not an actor of the app; the message names the closest.
    """
    if names is None:
        return tuple(specs)
    check_route(names, (s.name for s in specs), option="--actors")
    return tuple(s for s in specs if s.name in names)


@dataclass
class ActorCounts:
    workers: int = 0
    processed: int = 0
    failed: int = 0


class ServeStats(MeshHooks):
    """The mesh's hooks and Sink: counts per actor and final envelopes by phase."""

    def __init__(self, actors: Iterable[str]) -> None:
        self._log = LogSink()
        self.actors = {name: ActorCounts() for name in actors}
        self.finals: collections.Counter[Phase] = collections.Counter()

    def stepped(
        self, actor: str, result: StepResult, reason: str, duration_s: float, outputs: int
    ) -> None:
        counts = self.actors.setdefault(actor, ActorCounts())
        counts.processed += 1
        if result is StepResult.FAILED:
            counts.failed += 1

    def on_workers(self, actor: str, workers: int) -> None:
        self.actors.setdefault(actor, ActorCounts()).workers = workers

    async def record(self, envelope: Envelope) -> None:
        self.finals[envelope.status.phase] += 1
        await self._log.record(envelope)


def format_status(stats: ServeStats, depths: Mapping[str, int | None], *, ends: bool) -> str:
    """One line: each actor's workers, queue depth (`?` if unknown), processed and failed."""
    parts = []
    for name, counts in stats.actors.items():
        depth = depths.get(name)
        parts.append(
            f"{name} workers={counts.workers} depth={'?' if depth is None else depth}"
            f" processed={counts.processed} failed={counts.failed}"
        )
    if ends:
        succeeded = stats.finals[Phase.SUCCEEDED]
        failed = sum(stats.finals.values()) - succeeded
        parts.append(f"finals succeeded={succeeded} failed={failed}")
    return "asya: " + " | ".join(parts)


class Service:
    """See the module docstring; `run(stop)` is the whole life of the service."""

    def __init__(
        self,
        specs: Sequence[ActorSpec],
        *,
        connect: Callable[[], Awaitable[Transport]],
        say: Callable[[str], None],
        clock: Clock,
        rng: random.Random,
        options: ServeOptions | None = None,
    ) -> None:
        self.specs = tuple(specs)
        self.state = ServeState.STARTING
        self.stats = ServeStats(s.name for s in self.specs)
        self._connect = connect
        self._say = say
        self._clock = clock
        self._rng = rng
        self._options = options or ServeOptions()
        self._transport: Transport | None = None
        self.metrics = Metrics()
        self.metrics.watch_gpus(lambda: read_inventory().devices)
        """The instruments every worker and end actor counts on; served at /metrics."""

    def is_live(self) -> bool:
        return self.state is not ServeState.STOPPED

    def is_ready(self) -> bool:
        # Not ready while publishing is impossible: consuming would only give envelopes back.
        return (
            self.state is ServeState.RUNNING
            and self._transport is not None
            and self._transport.can_publish
        )

    async def status(self) -> ServeStatus:
        """What the service is doing now: its state, and each actor's workers, queue and counts.

        A queue that cannot be read (not connected yet, the broker away) shows as unknown.
        """
        names = [s.name for s in self.specs]
        if self._options.ends:
            names += [name for name in (HAPPY_END, ERROR_END) if name not in names]
        actors = []
        for name in names:
            counts = self.stats.actors.get(name) or ActorCounts()
            queued, in_flight = None, 0
            if self._transport is not None and self.state is ServeState.RUNNING:
                try:
                    depth = await self._transport.depth(name)
                    queued, in_flight = depth.ready, depth.unacked
                except TransportError:
                    pass
            actors.append(
                ActorActivity(
                    name=name,
                    workers=counts.workers,
                    queued=queued,
                    in_flight=in_flight,
                    processed=counts.processed,
                    failed=counts.failed,
                )
            )
        succeeded = self.stats.finals[Phase.SUCCEEDED]
        return ServeStatus(
            state=self.state.value,
            actors=actors,
            finals_succeeded=succeeded,
            finals_failed=sum(self.stats.finals.values()) - succeeded,
        )

    async def status_json(self) -> bytes:
        """`status()` as JSON, the body of `GET /status`."""
        return msgspec.json.encode(await self.status())

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until `stop` is set, then drain; returns at once if stopped while connecting.

        Raises:
            ActorDefinitionError: an actor's worker could not start.
            TransportError: the broker failed while serving.
        """
        try:
            transport = await connect_until_stopped(
                self._connect, stop=stop, rng=self._rng, say=lambda line: self._say(f"asya: {line}")
            )
            if transport is None:
                return
            self._transport = transport
            try:
                await self._serve(transport, stop)
            finally:
                await transport.aclose()
        finally:
            self.state = ServeState.STOPPED

    async def _serve(self, transport: Transport, stop: asyncio.Event) -> None:
        mesh = Mesh(
            self.specs,
            transport=transport,
            hooks=self.stats,
            sink=self.stats,
            clock=self._clock,
            rng=self._rng,
            options=self._options.mesh,
            ends=self._options.ends,
            metrics=self.metrics,
        )
        async with mesh:
            self.state = ServeState.RUNNING
            names = ", ".join(s.name for s in self.specs)
            ends = " and the end actors" if self._options.ends else ""
            self._say(f"asya: serving {names}{ends}")
            reporter = asyncio.create_task(self._report(transport))
            try:
                await mesh.wait(_until(stop))
            finally:
                self.state = ServeState.DRAINING
                reporter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reporter
                self._say(f"asya: stopping; in-flight work has {self._options.mesh.grace_s} s")
        self._say("asya: stopped")

    async def _report(self, transport: Transport) -> None:
        every_s = self._options.status_every_s
        if every_s <= 0:
            return
        while True:
            await asyncio.sleep(every_s)
            depths: dict[str, int | None] = {}
            for spec in self.specs:
                try:
                    depths[spec.name] = (await transport.depth(spec.name)).total
                except TransportError:
                    depths[spec.name] = None
            self._say(format_status(self.stats, depths, ends=self._options.ends))


async def _until(event: asyncio.Event) -> None:
    await event.wait()
