"""Device utilisation: the share of a device-bound handler's standalone rate that asya reaches.

The handler (`bench.apps.device_hop`) holds "the device" for a fixed time per call with the GIL
released. Its standalone rate is what it does called in a plain loop in a process of its own
(`calls * batch / elapsed`, measured here, not computed: a 0.3 ms sleep takes about 0.4 ms).
Asya's rate is what the same handler does as an actor fed from a queue that is full before it
starts, in steady state: between the 10th and the 90th percentile of the completion times, so
that neither the start-up nor the tail (the last, part-filled batches) counts. The share of
the one in the other says how much of the device asya keeps busy; DESIGN.md §5 asks for a
worker that never waits on a round trip.

Paths (`PATHS`):
- `local`: the local runner's GPU-worker path. A `Mesh` on the in-memory transport, the actor
  declared `gpus=1, cpu_fallback=True`, so its worker's handler runs in a process of its own
  (`ProcessInvoker`: with a GPU where one is free, else on CPU) and the runner's process does
  the routing; batch 32 at `device_ms` a batch, and batch 1 at `call_ms` a call. Completion
  times are taken as each final envelope reaches `happy-end` (the run's sink).
- `pods`: the same handler as a pod, a runtime and a sidecar process as `AsyaPods` runs them,
  on RabbitMQ (the run's first queue type), batch 32 at `pods_device_ms` a batch. Completion
  times are the benchmark sink's arrivals from `happy-end`'s queue. 40 ms a batch (800 items/s
  at most) by default because the broker on a 2-core machine must carry every item twice
  (in, and out to `happy-end`), with publisher confirms, while the sidecar, the runtime and the
  benchmark's own publisher and sink share the same two cores: the pods carry about 2,600
  hop-deliveries a second there with trivial handlers (the 3-hop pipeline's ~880 msgs/s), so
  800 items a second leaves the device, not the broker, as the limit; at 5 ms a batch (6,400
  items/s) the broker would be, and the share would measure it.

Each queue holds `seconds` of device work at the standalone rate (whole batches). Nothing here
sets `ASYA_PIPELINE_DEPTH` or depends on it: the pod's processes inherit the environment and
read it there (asya's default where unset), while the local mesh is built here with asya's
default options whatever it says. The results record the variable as this process found it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from aio_pika.abc import AbstractRobustConnection

from asya.actor import ActorSpec, spec_of
from asya.client import Client
from asya.clock import SystemClock
from asya.envelope import Envelope, Phase
from asya.errors import AsyaError
from asya.local.gpus import GpuMode, machine_gpus
from asya.local.mesh import Mesh
from asya.local.report import RunStats
from asya.routing import ERROR_END, HAPPY_END
from asya.transport.memory import MemoryTransport
from bench.apps import device_hop
from bench.contenders.asya import Actor, AsyaPods
from bench.contenders.base import PYTHON, Setup
from bench.measure import ContenderFailedError
from bench.steady import STEADY_HIGH, STEADY_LOW, steady_window
from bench.traffic import Publisher, Sink, payload

PATHS: Final = ("local", "pods")
DEVICE_MODULE: Final = "bench.apps.device_hop"
PIPELINE_DEPTH_VARIABLE: Final = "ASYA_PIPELINE_DEPTH"
STANDALONE_S: Final = 1.0
"""How long the handler is called in a plain loop for its standalone rate."""
MIN_BATCHES: Final = 10
"""The fewest calls' worth of items a queue is filled with, however slow the device."""
_PHASE: Final = "utilisation"


@dataclass(frozen=True)
class UtilisationPlan:
    paths: tuple[str, ...]
    """Which of `PATHS` to measure."""
    device_ms: float
    """Device time of one batch of 32 on the local path."""
    call_ms: float
    """Device time of one call at batch 1 on the local path."""
    pods_device_ms: float
    """Device time of one batch of 32 on the pods."""
    seconds: float
    """Device work each queue is filled with, in seconds at the standalone rate."""
    queue_type: str
    """The pods' queue type."""
    payload_bytes: int
    timeout_s: float
    """Longest wait for one run's items before it counts as failed."""
    pipeline_depth: str | None
    """`ASYA_PIPELINE_DEPTH` as this process found it (None: unset), recorded, not set."""


@dataclass(frozen=True)
class Case:
    """One row of the table: a path, an actor of `bench.apps.device_hop`, its device time."""

    path: str
    actor: str
    batch: int
    device_ms: float

    @property
    def env(self) -> dict[str, str]:
        """The environment that sets the handler's device time, where it runs."""
        name = device_hop.BATCH_MS_VARIABLE if self.batch > 1 else device_hop.ONE_MS_VARIABLE
        return {name: f"{self.device_ms:g}"}

    @property
    def label(self) -> str:
        return f"{self.path} batch {self.batch} at {self.device_ms:g} ms"


def cases(plan: UtilisationPlan) -> list[Case]:
    """The rows `plan` asks for, local before pods."""
    found = []
    if "local" in plan.paths:
        found.append(Case("local", "device-batch", device_hop.BATCH, plan.device_ms))
        found.append(Case("local", "device-one", 1, plan.call_ms))
    if "pods" in plan.paths:
        found.append(Case("pods", "device-batch", device_hop.BATCH, plan.pods_device_ms))
    return found


def standalone_per_s(calls: int, batch: int, elapsed_s: float) -> float:
    """Items a second of the handler called `calls` times in a loop that took `elapsed_s`."""
    return calls * batch / elapsed_s


def share(asya_per_s: float, standalone: float) -> float:
    """The share of the standalone rate that asya reached (1.0: the device never waited)."""
    return round(asya_per_s / standalone, 3)


def items_for(standalone: float, seconds: float, batch: int) -> int:
    """Whole batches holding `seconds` of device work at the standalone rate (at least
    `MIN_BATCHES` of them)."""
    return max(MIN_BATCHES, math.ceil(standalone * seconds / batch)) * batch


async def measure_utilisation(
    plan: UtilisationPlan,
    setup_for: Callable[[str], Setup],
    connection: AbstractRobustConnection,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Every case of `plan`, one after another; the results as JSON."""
    rows = [
        await _measure(
            case, plan, setup_for(f"utilisation-{case.path}-{case.batch}"), connection, say
        )
        for case in cases(plan)
    ]
    return {
        "pipeline_depth": plan.pipeline_depth,
        "steady_window": [STEADY_LOW, STEADY_HIGH],
        "seconds_queued": plan.seconds,
        "batch_wait_ms": device_hop.BATCH_WAIT_MS,
        "pods_queue_type": plan.queue_type,
        "rows": rows,
    }


async def _measure(
    case: Case,
    plan: UtilisationPlan,
    setup: Setup,
    connection: AbstractRobustConnection,
    say: Callable[[str], None],
) -> dict[str, Any]:
    say(f"bench: utilisation {case.label}: starting")
    head: dict[str, Any] = {
        "path": case.path,
        "transport": "memory" if case.path == "local" else f"rabbitmq-{plan.queue_type}",
        "batch": case.batch,
        "device_ms": case.device_ms,
    }
    try:
        alone = await _standalone(case, setup)
        alone_per_s = standalone_per_s(alone["calls"], case.batch, alone["elapsed_s"])
        count = items_for(alone_per_s, plan.seconds, case.batch)
        if case.path == "local":
            completions, delivery = await _run_local(case, setup, count, plan)
        else:
            completions, delivery = await _run_pods(case, setup, count, plan, connection)
        window = steady_window(completions)
    except (ContenderFailedError, AsyaError, ValueError) as exc:
        say(f"bench: utilisation {case.label}: FAILED: {exc}")
        return {**head, "error": str(exc)}
    row = {
        **head,
        "items": count,
        "standalone": {"calls": alone["calls"], "seconds": round(alone["elapsed_s"], 4)},
        "standalone_per_s": round(alone_per_s, 1),
        "asya_per_s": round(window.per_s, 1),
        "share": share(window.per_s, alone_per_s),
        "window": {"items": window.items, "seconds": round(window.seconds, 4)},
        "delivery": delivery,
    }
    say(
        f"bench: utilisation {case.label}: standalone {alone_per_s:.0f}/s, asya"
        f" {window.per_s:.0f}/s: share {row['share']:.2f}"
    )
    return row


async def _standalone(case: Case, setup: Setup) -> dict[str, Any]:
    """The handler in a plain loop, in a process of its own with the case's device time."""
    process = await asyncio.create_subprocess_exec(
        PYTHON,
        "-m",
        DEVICE_MODULE,
        case.actor,
        str(STANDALONE_S),
        env=setup.env(case.env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        raise ContenderFailedError(
            f"standalone {case.actor} exited {process.returncode}: {err.decode(errors='replace')}"
        )
    measured: dict[str, Any] = json.loads(out)
    return measured


def _spec(actor: str) -> ActorSpec:
    spec = spec_of(getattr(device_hop, actor.replace("-", "_")))
    assert spec is not None, f"{DEVICE_MODULE}.{actor} is not an actor"
    return spec


async def _run_local(
    case: Case, setup: Setup, count: int, plan: UtilisationPlan
) -> tuple[list[float], dict[str, int]]:
    """`count` envelopes queued in memory, then the mesh started; their completion times."""
    spec = _spec(case.actor)
    transport = MemoryTransport()
    await transport.declare(spec.name)
    client = Client(transport)
    pad = "x" * plan.payload_bytes
    for seq in range(count):
        await client.send([spec.name], payload(_PHASE, seq, pad))
    completions: list[float] = []

    async def completed(envelope: Envelope) -> None:
        if envelope.status.phase is Phase.SUCCEEDED:
            completions.append(time.perf_counter())

    stats = RunStats(completed)
    for _ in range(count):
        stats.on_fed()
    mesh = Mesh(
        [spec],
        transport=transport,
        hooks=stats,
        sink=stats,
        clock=SystemClock(),
        rng=random.Random(),
        # The worker's processes get the device time, and the checkout on PYTHONPATH.
        gpus=machine_gpus([spec], GpuMode.ASSIGN, env=setup.env(case.env)),
    )
    async with mesh:
        try:
            async with asyncio.timeout(plan.timeout_s):
                await mesh.wait(stats.drained())
        except TimeoutError:
            raise ContenderFailedError(
                f"{stats.finished} of {count} finished within {plan.timeout_s:g} s"
            ) from None
    return completions, {"sent": count, "arrived": stats.succeeded, "failed": stats.failed}


async def _run_pods(
    case: Case,
    setup: Setup,
    count: int,
    plan: UtilisationPlan,
    connection: AbstractRobustConnection,
) -> tuple[list[float], dict[str, int]]:
    """`count` envelopes published and confirmed, then the pod started; their arrival times."""
    pods = AsyaPods(
        setup, [Actor(case.actor, f"{DEVICE_MODULE}:{_spec(case.actor).qualname}", env=case.env)]
    )
    pad = "x" * plan.payload_bytes
    try:
        # `AsyaPods.start` less the launch: the queue is filled before the pod consumes.
        await pods.transport.connect()
        for name in (case.actor, HAPPY_END, ERROR_END):
            await pods.transport.declare(name)
        sink = await Sink.open(connection, pods.wire)
        publisher = await Publisher.open(connection, pods.wire)
        try:
            await publisher.publish_all(
                [pods.wire.wrap(payload(_PHASE, seq, pad)) for seq in range(count)]
            )
            pods.launch()
            await _all_arrived(pods, sink, count, plan.timeout_s)
        finally:
            await publisher.close()
            await sink.close()
    finally:
        await pods.stop()
    delivery = {
        "sent": count,
        "arrived": len(sink.arrived),
        "failed": len(sink.failed),
        "duplicates": sink.duplicates,
    }
    return [a.at for a in sink.of(_PHASE)], delivery


async def _all_arrived(pods: AsyaPods, sink: Sink, count: int, timeout_s: float) -> None:
    """Until `count` items arrived; fails early if a pod's process exits."""
    deadline = time.monotonic() + timeout_s
    while sink.count(_PHASE) < count:
        exited = pods.processes.exited()
        if exited or time.monotonic() >= deadline:
            why = "a process exited" if exited else f"not all arrived within {timeout_s:g} s"
            raise ContenderFailedError(
                f"{sink.count(_PHASE)} of {count} arrived; {why}\n" + pods.processes.tails()
            )
        with contextlib.suppress(TimeoutError):
            await sink.wait_for(_PHASE, count, min(1.0, max(0.0, deadline - time.monotonic())))
