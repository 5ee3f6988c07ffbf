"""A local run on the memory transport with chain metrics, and reading a scrape back."""

from __future__ import annotations

import random

from prometheus_client.parser import text_string_to_metric_families

from asya.actor import REGISTRY
from asya.client import Client
from asya.clock import SystemClock
from asya.local.mesh import Mesh, MeshOptions
from asya.local.report import RunStats
from asya.metrics import Metrics
from asya.transport.memory import MemoryTransport


async def _ignore(envelope) -> None:
    return None


async def run_mesh(payloads, route, *, transport=None, metrics=None, raw=()) -> RunStats:
    """Every payload sent along `route` (and each `raw` body to its first actor) on an
    in-process mesh, until all are final."""
    used = transport or MemoryTransport()
    stats = RunStats(_ignore)
    mesh = Mesh(
        tuple(REGISTRY),
        transport=used,
        hooks=stats,
        sink=stats,
        clock=SystemClock(),
        rng=random.Random(3),
        options=MeshOptions(poll_interval_s=0.01),
        metrics=metrics or Metrics(),
    )
    async with mesh:
        client = Client(used)
        for payload in payloads:
            stats.on_fed()
            await client.send(route, payload)
        for body in raw:
            stats.on_fed()
            await used.publish(route[0], body)
        await mesh.wait(stats.drained())
    return stats


def scrape(metrics: Metrics) -> dict[tuple[str, frozenset], float]:
    """The text exposition parsed back: (sample name, labels) -> value."""
    text = metrics.exposition().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)
