"""Celery with `acks_late` and publisher confirms: one worker per hop (`bench.apps.celery_hops`).

Each hop's worker is `celery worker -P threads -c INFLIGHT` with a prefetch multiplier of 1,
so it holds and runs as many messages at once as every other contender's hop (threads, like
Dramatiq's workers; the prefork pool would need a process per message in flight). Gossip,
mingle and worker heartbeats are off: cluster chatter, not message work.

On quorum queues Celery's workers also declare its native delayed delivery topology (queues
and exchanges `celery_delayed_*`, broker-wide names): deleted after the run unless they were
there before it.
"""

from __future__ import annotations

import importlib.metadata
import json
import uuid
from typing import Any

import aio_pika

from bench.contenders.base import PYTHON, Setup
from bench.contenders.raw_aio_pika import delete_queues
from bench.procs import Launch, ProcessGroup
from bench.traffic import Outgoing, Payload


def missing() -> str | None:
    """Why this contender cannot run here, or None."""
    try:
        importlib.metadata.version("celery")
    except importlib.metadata.PackageNotFoundError:
        return "celery is not installed (pip install -e '.[bench]')"
    return None


class CeleryWire:
    """Celery's task message (protocol 2, JSON), built by Celery's own code."""

    def __init__(self, first: str, sink: str) -> None:
        from celery import Celery
        from kombu.serialization import dumps

        self._app = Celery("bench-publisher", set_as_current=False)
        self._dumps = dumps
        self.exchange = ""
        self.routing_key = first
        self.done_queues = [sink]
        self.failed_queues: list[str] = []

    def wrap(self, payload: Payload) -> Outgoing:
        task_id = str(uuid.uuid4())
        message = self._app.amqp.as_task_v2(task_id, "hop_0", args=(payload,), kwargs={})
        content_type, encoding, body = self._dumps(message.body, serializer="json")
        return Outgoing(
            body.encode() if isinstance(body, str) else body,
            headers=message.headers,
            content_type=content_type,
            content_encoding=encoding,
            correlation_id=task_id,
        )

    def unwrap(self, body: bytes) -> Payload:
        value = json.loads(body)[0][0]
        if not isinstance(value, dict):
            raise ValueError("argument is not an object")
        return value


class CeleryPeer:
    name = "celery"

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.queues = [f"{setup.prefix}-{hop}" for hop in setup.hop_names]
        self.sink = f"{setup.prefix}-sink"
        self.wire = CeleryWire(self.queues[0], self.sink)
        self.processes = ProcessGroup(setup.workdir)
        self.notes: list[str] = ["threads pool; gossip, mingle and heartbeats off"]
        self._delayed_delivery_was_there = True

    async def start(self) -> None:
        # Declared and bound as Celery declares them, so its workers' declarations agree.
        arguments: dict[str, Any] | None = (
            {"x-queue-type": "quorum"} if self.setup.queue_type == "quorum" else None
        )
        connection = await aio_pika.connect(self.setup.url)
        async with connection:
            channel = await connection.channel()
            exchange = await channel.declare_exchange(
                self.setup.prefix, aio_pika.ExchangeType.DIRECT, durable=True
            )
            for name in (*self.queues, self.sink):
                queue = await channel.declare_queue(name, durable=True, arguments=arguments)
                await queue.bind(exchange, routing_key=name)
        self._delayed_delivery_was_there = await _exchange_exists(
            self.setup.url, _delayed_delivery_names()[1][-1]
        )
        env = self.setup.env(
            {
                "BENCH_PREFIX": self.setup.prefix,
                "BENCH_URL": self.setup.url,
                "BENCH_HOPS": str(self.setup.hops),
                "BENCH_QUEUE_TYPE": self.setup.queue_type,
            }
        )
        for index, queue_name in enumerate(self.queues):
            argv = [
                PYTHON,
                "-m",
                "celery",
                "-A",
                "bench.apps.celery_hops",
                "worker",
                "-Q",
                queue_name,
                "-c",
                str(self.setup.inflight),
                "-P",
                "threads",
                "-n",
                f"hop-{index}@{self.setup.prefix}",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-l",
                "WARNING",
            ]
            self.processes.start(Launch("worker", argv, env, label=queue_name))

    async def stop(self) -> list[str]:
        killed = await self.processes.stop()
        await delete_queues(self.setup.url, [*self.queues, self.sink])
        connection = await aio_pika.connect(self.setup.url)
        async with connection:
            channel = await connection.channel()
            await channel.exchange_delete(self.setup.prefix)
            if not self._delayed_delivery_was_there:
                queues, exchanges = _delayed_delivery_names()
                for queue in queues:
                    await channel.queue_delete(queue)
                for exchange_name in exchanges:
                    await channel.exchange_delete(exchange_name)
        return killed


def _delayed_delivery_names() -> tuple[list[str], list[str]]:
    """Celery's native delayed delivery queues, and its exchanges (the main one last)."""
    from kombu.transport import native_delayed_delivery as delayed

    levels = [delayed.level_name(level) for level in range(delayed.MAX_LEVEL + 1)]
    return levels, [*levels, delayed.CELERY_DELAYED_DELIVERY_EXCHANGE]


async def _exchange_exists(url: str, name: str) -> bool:
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        try:
            await channel.declare_exchange(name, passive=True)
        except aio_pika.exceptions.ChannelClosed:
            return False
        return True
