"""What a local run did: per-actor statistics, final envelopes, and the summary table.

`RunStats` is the consumers' Observer and the end actors' Sink at once: it counts each step
per actor and each final envelope by outcome and reason, forwards final envelopes to the
run's output (JSON lines), and knows when the run is over — on any transport, since it counts
envelopes rather than asking the broker. `format_summary` renders the table `asya dev` ends
with.
"""

from __future__ import annotations

import asyncio
import collections
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from asya.consumer import StepResult
from asya.envelope import Envelope, Phase


@dataclass
class ActorStats:
    processed: int = 0
    retried: int = 0
    failed: int = 0
    durations_s: list[float] = field(default_factory=list)
    peak_workers: int = 0


class RunStats:
    """Counts steps per actor and final envelopes; see the module docstring."""

    def __init__(self, emit: Callable[[Envelope], Awaitable[None]]) -> None:
        self._emit = emit
        self.actors: dict[str, ActorStats] = collections.defaultdict(ActorStats)
        self.succeeded = 0
        self.failed_by_reason: collections.Counter[str] = collections.Counter()
        self._alive = 0
        self._drained = asyncio.Event()
        self._drained.set()

    def on_fed(self) -> None:
        """An envelope went into the mesh."""
        self._change_alive(1)

    def _change_alive(self, delta: int) -> None:
        self._alive += delta
        if self._alive <= 0:
            self._drained.set()
        else:
            self._drained.clear()

    async def drained(self) -> None:
        """Wait until every envelope fed in, and every one made from them, is final."""
        await self._drained.wait()

    def on_step(self, actor: str, result: StepResult, duration_s: float, outputs: int) -> None:
        self._change_alive(outputs - 1)
        stats = self.actors[actor]
        stats.processed += 1
        stats.durations_s.append(duration_s)
        if result is StepResult.RETRIED:
            stats.retried += 1
        elif result is StepResult.FAILED:
            stats.failed += 1

    def on_workers(self, actor: str, workers: int) -> None:
        stats = self.actors[actor]
        stats.peak_workers = max(stats.peak_workers, workers)

    async def record(self, envelope: Envelope) -> None:
        self._change_alive(-1)
        if envelope.status.phase is Phase.SUCCEEDED:
            self.succeeded += 1
        else:
            reason = envelope.status.reason
            self.failed_by_reason[reason.value if reason else "Unknown"] += 1
        await self._emit(envelope)

    @property
    def failed(self) -> int:
        return sum(self.failed_by_reason.values())

    @property
    def finished(self) -> int:
        return self.succeeded + self.failed


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (`fraction` in 0..1); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def format_summary(stats: RunStats, actor_order: Sequence[str], elapsed_s: float) -> str:
    """The per-actor table and the totals line."""
    header = ("actor", "processed", "retried", "failed", "p50 ms", "p95 ms", "peak workers")
    rows = [header]
    for name in actor_order:
        s = stats.actors.get(name, ActorStats())
        rows.append(
            (
                name,
                str(s.processed),
                str(s.retried),
                str(s.failed),
                f"{percentile(s.durations_s, 0.50) * 1000:.1f}",
                f"{percentile(s.durations_s, 0.95) * 1000:.1f}",
                str(s.peak_workers),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    reasons = ", ".join(f"{r} {n}" for r, n in sorted(stats.failed_by_reason.items()))
    total = (
        f"final envelopes: {stats.finished} ({stats.succeeded} succeeded, {stats.failed} failed"
        + (f": {reasons}" if reasons else "")
        + f") in {elapsed_s:.2f} s"
    )
    return "\n".join([*lines, "", total])
