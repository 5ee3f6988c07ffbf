"""Admission engine throughput: cycles until quiescent over large pending backlogs.

    python bench/admission.py [--sizes 10000 50000] [--seed 7] [--repeat 3]

Builds, for each size N, a cluster of 100 pools in 10 cohorts with quota for about half of
the N pending workloads (mixed priorities, one workload in ten a multi-pod gang, some with
minCount), runs `asya.admission.scheduler.simulate` until nothing changes, and prints one
JSON object per size: cycles, seconds (the best of --repeat runs, to keep other load on the
machine out of the figure), admitted, pending, preempted. Seconds are wall-clock on this
machine; compare sizes with each other: the growth should be no worse than n log n.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from typing import Any

from asya.admission.model import load_scenario
from asya.admission.scheduler import simulate

POOLS = 100
COHORTS = 10


def build(size: int, rng: random.Random) -> dict[str, Any]:
    """A scenario of `size` pending workloads whose total CPU is about twice the quota."""
    per_pool_cpu = size * 5 // POOLS  # workloads ask 10 CPU on average: quota for ~half
    pools = []
    for index in range(POOLS):
        strategy = "StrictFIFO" if index % 10 == 0 else "BestEffortFIFO"
        cpu = {"nominal": per_pool_cpu}
        if index % 3 == 0:
            cpu["borrowingLimit"] = per_pool_cpu // 2
        if index % 4 == 0:
            cpu["lendingLimit"] = per_pool_cpu // 2
        pools.append(
            {
                "name": f"pool-{index}",
                "cohort": f"cohort-{index % COHORTS}",
                "queueingStrategy": strategy,
                "preemption": {
                    "withinPool": "LowerPriority",
                    "reclaimWithinCohort": "LowerPriority",
                },
                "quotas": [
                    {
                        "flavor": "h100",
                        "resources": {
                            "cpu": {"nominal": per_pool_cpu // 4},
                            "nvidia.com/gpu": {"nominal": 8},
                        },
                    },
                    {"flavor": "default", "resources": {"cpu": cpu}},
                ],
            }
        )
    workloads = []
    for index in range(size):
        gang = index % 10 == 0
        count = rng.randint(2, 8) if gang else 1
        requests = {"cpu": rng.choice([2, 5, 10, 15, 18]) if not gang else 2}
        if gang and index % 20 == 0:
            requests["nvidia.com/gpu"] = 1
        pod_set = {"name": "main", "count": count, "requests": requests}
        if gang and index % 30 == 0:
            pod_set["minCount"] = 1
        workloads.append(
            {
                "name": f"wl-{index}",
                "pool": f"pool-{rng.randrange(POOLS)}",
                "priority": rng.choice([0, 0, 0, 10, 100]),
                "created": index,
                "podSets": [pod_set],
            }
        )
    return {"pools": pools, "workloads": workloads}


def measure(size: int, seed: int, repeat: int) -> dict[str, Any]:
    scenario = load_scenario(build(size, random.Random(seed)))
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = simulate(scenario)
        timings.append(time.perf_counter() - started)
    seconds = min(timings)
    return {
        "workloads": size,
        "pools": POOLS,
        "cohorts": COHORTS,
        "cycles": result.cycles,
        "seconds": round(seconds, 3),
        "admitted": len(result.admitted),
        "pending": len(result.pending),
        "preempted": len(result.preempted),
        "quiescent": result.quiescent,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; the best counts")
    args = parser.parse_args()
    runs = [measure(size, args.seed, args.repeat) for size in args.sizes]
    for run in runs:
        print(json.dumps(run))
    if len(runs) >= 2:
        small, large = runs[0], runs[-1]
        ratio = large["seconds"] / max(small["seconds"], 1e-9)
        growth = large["workloads"] / small["workloads"]
        n_log_n = growth * math.log(large["workloads"]) / math.log(small["workloads"])
        print(
            json.dumps(
                {
                    "ratio_seconds": round(ratio, 2),
                    "ratio_workloads": growth,
                    "ratio_n_log_n": round(n_log_n, 2),
                }
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
