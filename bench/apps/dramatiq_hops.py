"""Dramatiq actors of the benchmark: `hop_0` … `hop_{BENCH_HOPS - 1}`, each sending the next.

    python -m dramatiq bench.apps.dramatiq_hops --processes 1 --threads N --queues QUEUE

Its broker has publisher confirms on (`confirm_delivery=True`); messages are persistent and
acked after the actor returns (Dramatiq's defaults), with its default middleware. Dramatiq has
no option for the queue type: on quorum queues the broker adds `x-queue-type` to the
arguments Dramatiq declares its queues with (`_build_queue_arguments`, the one place it builds
them, not a public API). The last hop sends to `sink`, an actor no worker runs: its queue is
read by the benchmark.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker

PREFIX = os.environ["BENCH_PREFIX"]
HOPS = int(os.environ["BENCH_HOPS"])
QUEUE_TYPE = os.environ["BENCH_QUEUE_TYPE"]

Doc = dict[str, Any]


class _Broker(RabbitmqBroker):
    def _build_queue_arguments(self, queue_name: str) -> dict[str, Any]:
        arguments: dict[str, Any] = super()._build_queue_arguments(queue_name)
        if QUEUE_TYPE == "quorum":
            arguments["x-queue-type"] = "quorum"
        return arguments


dramatiq.set_broker(_Broker(url=os.environ["BENCH_URL"], confirm_delivery=True))


def queue_name(hop: str) -> str:
    return f"{PREFIX}-{hop}"


@dramatiq.actor(actor_name="sink", queue_name=queue_name("sink"))
def sink(doc: Doc) -> None:
    """Never runs: the benchmark reads this queue."""


def _hop(index: int, send: Callable[[Doc], Any]) -> Callable[[Doc], None]:
    key = f"hop-{index}"

    def hop(doc: Doc) -> None:
        send({**doc, key: 1})

    return hop


_next: Any = sink
for _index in reversed(range(HOPS)):
    _next = dramatiq.actor(actor_name=f"hop_{_index}", queue_name=queue_name(f"hop-{_index}"))(
        _hop(_index, _next.send)
    )
    globals()[f"hop_{_index}"] = _next
