"""A device-like actor for the utilisation runs: `device-batch` (32 at a time) and `device-one`.

Each call holds the device for a fixed time, simulated with `time.sleep`: the GIL is released
while it "runs", as it is while a GPU kernel does, so the process around the handler is free to
form the next call meanwhile; a spin would measure this machine's two cores fought over
instead. The time does not grow with the batch (a GPU does 32 rows in about the time of one):
`BENCH_DEVICE_BATCH_MS` per call of `device-batch`, `BENCH_DEVICE_ONE_MS` per call of
`device-one`, read at import, in the process that runs the handler.

Both declare one GPU with `cpu_fallback=True`, so the local runner runs their worker in a
process of its own (with a GPU if it finds one free, else on CPU), and one replica taking one
call at a time: one model on one device. Payloads go through unchanged, so the handler's own
work is the device time alone.

`python -m bench.apps.device_hop ACTOR SECONDS` calls the handler in a plain loop for about
SECONDS and prints, as JSON, how many calls it made, the batch and the time they took: the
standalone rate that asya's rate is compared with.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, Final

from asya import actor

BATCH: Final = 32
BATCH_WAIT_MS: Final = 10
BATCH_MS_VARIABLE: Final = "BENCH_DEVICE_BATCH_MS"
ONE_MS_VARIABLE: Final = "BENCH_DEVICE_ONE_MS"
BATCH_S = float(os.environ.get(BATCH_MS_VARIABLE, "5")) / 1000
ONE_S = float(os.environ.get(ONE_MS_VARIABLE, "0.3")) / 1000

Doc = dict[str, Any]


@actor(
    name="device-batch",
    gpus=1,
    cpu_fallback=True,
    batch=BATCH,
    batch_wait_ms=BATCH_WAIT_MS,
    concurrency=1,
    min_replicas=1,
    max_replicas=1,
)
def device_batch(docs: list[Doc]) -> list[Doc]:
    time.sleep(BATCH_S)
    return docs


@actor(name="device-one", gpus=1, cpu_fallback=True, concurrency=1, min_replicas=1, max_replicas=1)
def device_one(doc: Doc) -> Doc:
    time.sleep(ONE_S)
    return doc


def standalone(name: str, seconds: float) -> dict[str, Any]:
    """Call actor `name`'s handler in a loop for about `seconds`: calls, batch, elapsed."""
    docs = [{"seq": i} for i in range(BATCH)]
    calls = 0
    started = time.perf_counter()
    elapsed = 0.0
    while elapsed < seconds:
        if name == "device-batch":
            device_batch(docs)
        else:
            device_one(docs[0])
        calls += 1
        elapsed = time.perf_counter() - started
    return {"calls": calls, "batch": BATCH if name == "device-batch" else 1, "elapsed_s": elapsed}


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("device-batch", "device-one"):
        print("usage: python -m bench.apps.device_hop device-batch|device-one SECONDS")
        return 2
    print(json.dumps(standalone(argv[0], float(argv[1]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
