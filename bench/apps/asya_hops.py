"""asya actors of the benchmark: `hop-0` … `hop-{BENCH_HOPS - 1}` and `batch-work`.

Each hop adds a key to the payload and returns it (a trivial handler: what is measured is the
framework). Each runs as one replica holding `BENCH_INFLIGHT` envelopes at once, under
`asya serve` as in pods, so every hop has the same in-flight budget as every other contender's.

`batch-work` is a batch actor whose call costs `BENCH_BATCH_FIXED_MS + BENCH_BATCH_ITEM_MS *
items`, simulated with `time.sleep` in a sync handler: the cost of a GPU batch is mostly time
spent waiting on the device, not CPU, and a spin would measure this machine's two cores fought
over by the sidecar and the broker instead. One call at a time (concurrency 1), like a model on
one GPU; its batch size and wait come from `ASYA_ACTOR_OVERRIDES`, as on Kubernetes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from asya import actor

HOPS = int(os.environ.get("BENCH_HOPS", "3"))
INFLIGHT = int(os.environ.get("BENCH_INFLIGHT", "16"))
FIXED_S = float(os.environ.get("BENCH_BATCH_FIXED_MS", "50")) / 1000
ITEM_S = float(os.environ.get("BENCH_BATCH_ITEM_MS", "0.5")) / 1000

Doc = dict[str, Any]


def _hop(index: int) -> Callable[[Doc], Awaitable[Doc]]:
    key = f"hop-{index}"

    async def hop(doc: Doc) -> Doc:
        return {**doc, key: 1}

    # A module attribute of its own name, so `ASYA_HANDLER=bench.apps.asya_hops:hop_N` finds it.
    hop.__name__ = hop.__qualname__ = f"hop_{index}"
    return hop


for _index in range(HOPS):
    globals()[f"hop_{_index}"] = actor(
        name=f"hop-{_index}", concurrency=INFLIGHT, min_replicas=1, max_replicas=1
    )(_hop(_index))


@actor(name="batch-work", batch=32, concurrency=1, min_replicas=1, max_replicas=1)
def batch_work(docs: list[Doc]) -> list[Doc]:
    time.sleep(FIXED_S + ITEM_S * len(docs))
    return [{**doc, "batch": len(docs)} for doc in docs]
