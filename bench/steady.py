"""The steady state of a run: its rate between two percentiles of its completion times.

Neither the start-up (processes starting, a queue filling a pipeline) nor the tail (the last,
part-filled batches) counts. Pure and standard-library only: `bench.utilisation` and the GPU
check (`bench/gpu_check.py`, which must run before anything else is installed) both use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

STEADY_LOW: Final = 0.10
STEADY_HIGH: Final = 0.90


@dataclass(frozen=True)
class SteadyWindow:
    """Completions between two percentiles of the completion times, and when the window was."""

    items: int
    """Completions after the window's first one, up to and including its last."""
    start_s: float
    end_s: float

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    @property
    def per_s(self) -> float:
        return self.items / self.seconds


def steady_window(
    completions: Sequence[float], low: float = STEADY_LOW, high: float = STEADY_HIGH
) -> SteadyWindow:
    """The window from the `low` to the `high` quantile of `completions` (times in seconds, in
    any order), each the completion at that fraction of the way through, by rank.

    Raises:
        ValueError: fewer than two completions, or none later than the window's first.
    """
    ordered = sorted(completions)
    if len(ordered) < 2:
        raise ValueError(f"{len(ordered)} completion(s): a rate needs at least 2")
    first = round(low * (len(ordered) - 1))
    last = round(high * (len(ordered) - 1))
    seconds = ordered[last] - ordered[first]
    if last <= first or seconds <= 0:
        raise ValueError(
            f"completions {first} to {last} of {len(ordered)} span {seconds:g} s: no rate"
        )
    return SteadyWindow(items=last - first, start_s=ordered[first], end_s=ordered[last])
