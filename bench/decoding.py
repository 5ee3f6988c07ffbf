"""`python -m bench.decoding`: what the operator pays to read a namespace's AsyncActors.

A reconcile reads every actor of its namespace (`Kube.world`), each through `decode`, which
checks the CRD's CEL rules (`asya_operator.api.decoding.broken_rules`). This times one read of
N stored actors, first as new objects (the rules evaluated) and then again with only their
status changed (as after a round of status writes), in microseconds per actor, and how many
results are remembered (at most `RULES_CHECKED_KEPT`, about 200 bytes each). No broker, no
cluster: the decode alone.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections.abc import Sequence
from typing import Any

from asya_operator.api import decoding
from asya_operator.api.actor import AsyncActor


def _actor(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "asya.sh/v1alpha1",
        "kind": "AsyncActor",
        "metadata": {
            "name": f"actor-{index}",
            "namespace": f"team-{index % 100}",
            "uid": f"uid-{index}",
            "resourceVersion": str(index),
            "generation": 1,
        },
        "spec": {
            "image": "ghcr.io/acme/text:1",
            "handler": "text:normalize",
            "scaling": {"minReplicas": 0, "maxReplicas": 10},
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
        },
        "status": {"replicas": 1, "readyReplicas": 1, "conditions": []},
    }


def _read_all(bodies: Sequence[dict[str, Any]]) -> float:
    """Microseconds per actor to decode all of `bodies` once."""
    started = time.perf_counter()
    for body in bodies:
        decoding.decode(body, AsyncActor)
    return (time.perf_counter() - started) / len(bodies) * 1e6


def measure(count: int) -> dict[str, float]:
    decoding._checked.clear()
    decoding.decode(_actor(-1), AsyncActor)  # the schema and its rules compiled, not counted
    decoding._checked.clear()
    bodies = [_actor(i) for i in range(count)]
    first = _read_all(bodies)
    moved = copy.deepcopy(bodies)
    for body in moved:
        body["status"]["replicas"] = 2
        body["metadata"]["resourceVersion"] += "0"
    again = _read_all(moved)
    return {"actors": count, "first_us": first, "again_us": again, "kept": len(decoding._checked)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decoding", description=__doc__)
    parser.add_argument(
        "--counts", default="100,1000", help="actor counts to time, comma-separated (100,1000)"
    )
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",") if c.strip()]
    print("actors  first read (µs/actor)  read again (µs/actor)  results kept")
    for count in counts:
        row = measure(count)
        print(
            f"{row['actors']:>6}  {row['first_us']:>21.1f}  {row['again_us']:>21.1f}"
            f"  {row['kept']:>12.0f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
