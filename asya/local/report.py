"""What a local run did: per-actor statistics, final envelopes, and the summary table.

`RunStats` is the consumers' hooks (`asya.local.mesh.MeshHooks`) and the end actors' Sink at
once: it counts each step per actor and each final envelope by outcome and reason, forwards
final envelopes to the run's output (JSON lines), and knows when the run is over — on any
transport, since it counts envelopes rather than asking the broker. Steps are counted on the
sidecar's instruments (`asya.metrics`: `asya_envelopes_total`, `asya_processing_seconds`), and
the table reads them back: its p50 and p95 are estimated from the histogram's buckets, as a
dashboard's would be.
`format_summary` renders the table `asya dev` ends with.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

from asya.envelope import Envelope, Phase
from asya.hooks import StepResult
from asya.local.mesh import MeshHooks
from asya.metrics import EnvelopeOutcome, Metrics


@dataclass(frozen=True)
class ActorStats:
    """One actor's line of the summary, read from the run's metrics."""

    envelopes: int = 0
    """Envelopes the actor finished with: passed on (succeeded) or sent to `error-end`."""
    attempts: int = 0
    """Calls, retries included: `envelopes` plus `retried`."""
    retried: int = 0
    """Calls that failed and were tried again later."""
    failed: int = 0
    """Envelopes the actor sent to `error-end`."""
    p50_s: float = 0.0
    p95_s: float = 0.0
    peak_workers: int = 0


_STEP_OUTCOMES = (EnvelopeOutcome.SUCCEEDED, EnvelopeOutcome.RETRIED, EnvelopeOutcome.FAILED)


class RunStats(MeshHooks):
    """Counts steps per actor and final envelopes; see the module docstring."""

    def __init__(self, emit: Callable[[Envelope], Awaitable[None]]) -> None:
        self._emit = emit
        self.metrics = Metrics()
        """The run's instruments: prometheus-client's when installed, else in-house."""
        self._peak_workers: dict[str, int] = {}
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

    def stepped(
        self, actor: str, result: StepResult, reason: str, duration_s: float, outputs: int
    ) -> None:
        self._change_alive(outputs - 1)
        self._peak_workers.setdefault(actor, 0)
        self.metrics.stepped(actor, EnvelopeOutcome(result.value), reason, duration_s)

    def on_workers(self, actor: str, workers: int) -> None:
        self._peak_workers[actor] = max(self._peak_workers.get(actor, 0), workers)

    @property
    def actors(self) -> dict[str, ActorStats]:
        """Each actor's statistics so far (an actor never seen reads as all zeros)."""
        snapshot: dict[str, ActorStats] = collections.defaultdict(ActorStats)
        for actor in self._peak_workers:
            snapshot[actor] = self.actor(actor)
        return snapshot

    def actor(self, name: str) -> ActorStats:
        """`name`'s statistics so far."""
        counts = self.metrics.step_counts(name)
        return ActorStats(
            envelopes=counts[EnvelopeOutcome.SUCCEEDED] + counts[EnvelopeOutcome.FAILED],
            attempts=sum(counts[o] for o in _STEP_OUTCOMES),
            retried=counts[EnvelopeOutcome.RETRIED],
            failed=counts[EnvelopeOutcome.FAILED],
            p50_s=self.metrics.processing_quantile_s(name, 0.50),
            p95_s=self.metrics.processing_quantile_s(name, 0.95),
            peak_workers=self._peak_workers.get(name, 0),
        )

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


def aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    """`rows` (the first a header) as lines of aligned columns: the first to the left, the
    others to the right, a rule under the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


SUMMARY_COLUMNS: Final = (
    "actor",
    "envelopes",
    "attempts",
    "retried",
    "failed",
    "p50 ms",
    "p95 ms",
    "peak workers",
)
"""The summary's columns: envelopes each actor finished with (passed on or failed), its calls
(retries included, so attempts = envelopes + retried), the calls retried, the envelopes it
sent to `error-end`, the call time's median and 95th percentile, and its most workers at once."""


def format_summary(stats: RunStats, actor_order: Sequence[str], elapsed_s: float) -> str:
    """The per-actor table (`SUMMARY_COLUMNS`) and the totals line."""
    rows: list[Sequence[str]] = [SUMMARY_COLUMNS]
    for name in actor_order:
        s = stats.actor(name)
        rows.append(
            (
                name,
                str(s.envelopes),
                str(s.attempts),
                str(s.retried),
                str(s.failed),
                f"{s.p50_s * 1000:.1f}",
                f"{s.p95_s * 1000:.1f}",
                str(s.peak_workers),
            )
        )
    lines = aligned(rows)
    reasons = ", ".join(f"{r} {n}" for r, n in sorted(stats.failed_by_reason.items()))
    total = (
        f"final envelopes: {stats.finished} ({stats.succeeded} succeeded, {stats.failed} failed"
        + (f": {reasons}" if reasons else "")
        + f") in {elapsed_s:.2f} s"
    )
    return "\n".join([*lines, "", total])
