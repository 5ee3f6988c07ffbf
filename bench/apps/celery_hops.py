"""Celery tasks of the benchmark: `hop_0` … `hop_{BENCH_HOPS - 1}`, each sending the next.

    celery -A bench.apps.celery_hops worker -Q QUEUE -c N -P threads

`task_acks_late` (acked after the task returns), publisher confirms (kombu's
`confirm_publish`), persistent messages (Celery's default), one message prefetched per thread
(`worker_prefetch_multiplier=1`), no remote control (no pidbox queues). Queues of the run's
type: Celery declares quorum queues itself when a queue's arguments say so. The last hop
sends `sink`, a task no worker runs: its queue is read by the benchmark.
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from kombu.entity import Exchange, Queue

PREFIX = os.environ["BENCH_PREFIX"]
HOPS = int(os.environ["BENCH_HOPS"])
QUEUE_TYPE = os.environ["BENCH_QUEUE_TYPE"]

Doc = dict[str, Any]

EXCHANGE = Exchange(PREFIX, type="direct", durable=True)
ARGUMENTS = {"x-queue-type": "quorum"} if QUEUE_TYPE == "quorum" else None
NAMES = [f"hop_{i}" for i in range(HOPS)] + ["sink"]


def queue_name(task: str) -> str:
    return f"{PREFIX}-{task.replace('_', '-')}"


app = Celery("bench", broker=os.environ["BENCH_URL"])
app.conf.update(
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    broker_transport_options={"confirm_publish": True},
    broker_connection_retry_on_startup=True,
    task_ignore_result=True,
    worker_enable_remote_control=False,
    task_create_missing_queues=False,
    task_queues=[
        Queue(queue_name(n), EXCHANGE, routing_key=queue_name(n), queue_arguments=ARGUMENTS)
        for n in NAMES
    ],
    task_routes={n: {"queue": queue_name(n)} for n in NAMES},
)


@app.task(name="sink")
def sink(doc: Doc) -> None:
    """Never runs: the benchmark reads this queue."""


def _hop(index: int) -> None:
    key = f"hop-{index}"
    after = NAMES[index + 1]

    def hop(doc: Doc) -> None:
        app.tasks[after].delay({**doc, key: 1})

    hop.__name__ = hop.__qualname__ = NAMES[index]
    globals()[NAMES[index]] = app.task(name=NAMES[index])(hop)


for _index in range(HOPS):
    _hop(_index)
