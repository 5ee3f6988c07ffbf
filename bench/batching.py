"""Dynamic batching, measured through the pods: one batch actor at several batch sizes.

The actor (`batch-work` in `bench.apps.asya_hops`) costs `fixed + per_item * items` per call
and takes one call at a time, so a batch of B runs at best at B / (fixed + B * per_item)
messages per second: when the fixed cost dominates, a batch of 32 approaches 32 times a batch
of 1. Each size is its own contender run (a fresh pod, the same procedure as the pipeline's
contenders, without the light rates); the ratio of the largest size's throughput to the
smallest's is what the batching is worth here.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.contenders.asya import HOPS_MODULE, Actor, AsyaPods
from bench.contenders.base import Setup
from bench.measure import Plan


@dataclass(frozen=True)
class BatchPlan:
    sizes: tuple[int, ...]
    fixed_ms: float
    item_ms: float
    wait_ms: int
    rounds: int
    """Each size's saturation batch is `rounds` full batches."""

    def ideal_per_s(self, size: int) -> float:
        return size / (self.fixed_ms + self.item_ms * size) * 1000


def batch_actor(size: int, plan: BatchPlan) -> Actor:
    overrides = json.dumps({"batch": {"size": size, "waitMs": plan.wait_ms}})
    cost = {"BENCH_BATCH_FIXED_MS": str(plan.fixed_ms), "BENCH_BATCH_ITEM_MS": str(plan.item_ms)}
    return Actor("batch-work", f"{HOPS_MODULE}:batch_work", overrides, cost)


async def measure_batching(
    plan: BatchPlan,
    setup_for: Callable[[str], Setup],
    run: Callable[[AsyaPods, Plan], Awaitable[dict[str, Any]]],
    base: Plan,
) -> dict[str, Any]:
    """Each size through a fresh pod; `run` measures one contender with a plan."""
    sizes: list[dict[str, Any]] = []
    for size in plan.sizes:
        setup = setup_for(f"batch-{size}")
        pods = AsyaPods(setup, [batch_actor(size, plan)])
        pods.name = f"asya-pods batch {size}"
        one = Plan(
            count=plan.rounds * size,
            warmup=size,
            rates=(),
            light_count=0,
            payload_bytes=base.payload_bytes,
            timeout_s=base.timeout_s,
        )
        measured = await run(pods, one)
        sizes.append(
            {
                "batch": size,
                "ideal_per_s": round(plan.ideal_per_s(size), 1),
                **{k: measured[k] for k in ("saturation", "delivery") if k in measured},
                **({"error": measured["error"]} if "error" in measured else {}),
            }
        )
    return {
        "fixed_ms": plan.fixed_ms,
        "item_ms": plan.item_ms,
        "wait_ms": plan.wait_ms,
        "sizes": sizes,
        "ratio_largest_to_smallest": _ratio(sizes),
    }


def _ratio(sizes: Sequence[dict[str, Any]]) -> float | None:
    done = [s for s in sizes if "saturation" in s]
    if len(done) < 2:
        return None
    small = min(done, key=lambda s: s["batch"])
    large = max(done, key=lambda s: s["batch"])
    return round(float(large["saturation"]["per_s"]) / float(small["saturation"]["per_s"]), 2)
