"""Dramatiq with publisher confirms: one worker process per hop (`bench.apps.dramatiq_hops`).

Each hop's worker is `dramatiq --processes 1 --threads INFLIGHT` on its own queue with
`dramatiq_queue_prefetch=INFLIGHT`, so it holds and runs as many messages at once as every
other contender's hop.
"""

from __future__ import annotations

import importlib.metadata
import json
from typing import Any

import aio_pika

from bench.contenders.base import PYTHON, Setup
from bench.contenders.raw_aio_pika import delete_queues
from bench.procs import Launch, ProcessGroup
from bench.traffic import Outgoing, Payload


def missing() -> str | None:
    """Why this contender cannot run here, or None."""
    try:
        importlib.metadata.version("dramatiq")
        importlib.metadata.version("pika")
    except importlib.metadata.PackageNotFoundError:
        return "dramatiq[rabbitmq] is not installed (pip install -e '.[bench]')"
    return None


class DramatiqWire:
    def __init__(self, first: str, sink: str) -> None:
        import dramatiq

        self._message = dramatiq.Message
        self.exchange = ""
        self.routing_key = first
        self.done_queues = [sink]
        self.failed_queues: list[str] = []

    def wrap(self, payload: Payload) -> Outgoing:
        message: Any = self._message(
            queue_name=self.routing_key, actor_name="hop_0", args=(payload,), kwargs={}, options={}
        )
        return Outgoing(message.encode())

    def unwrap(self, body: bytes) -> Payload:
        value = json.loads(body)["args"][0]
        if not isinstance(value, dict):
            raise ValueError("argument is not an object")
        return value


class Dramatiq:
    name = "dramatiq"

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.queues = [f"{setup.prefix}-{hop}" for hop in setup.hop_names]
        self.sink = f"{setup.prefix}-sink"
        self.wire = DramatiqWire(self.queues[0], self.sink)
        self.processes = ProcessGroup(setup.workdir)
        self.notes = (
            ["quorum queues through a broker subclass (Dramatiq has no queue-type option)"]
            if setup.queue_type == "quorum"
            else []
        )

    async def start(self) -> None:
        # Declared as Dramatiq declares them, so its workers' own declarations agree.
        connection = await aio_pika.connect(self.setup.url)
        async with connection:
            channel = await connection.channel()
            for name in (*self.queues, self.sink):
                for queue, arguments in self._declarations(name):
                    await channel.declare_queue(queue, durable=True, arguments=arguments)
        env = self.setup.env(
            {
                "BENCH_PREFIX": self.setup.prefix,
                "BENCH_URL": self.setup.url,
                "BENCH_HOPS": str(self.setup.hops),
                "BENCH_QUEUE_TYPE": self.setup.queue_type,
                "dramatiq_queue_prefetch": str(self.setup.inflight),
            }
        )
        for queue in self.queues:
            argv = [
                PYTHON,
                "-m",
                "dramatiq",
                "bench.apps.dramatiq_hops",
                "--processes",
                "1",
                "--threads",
                str(self.setup.inflight),
                "--queues",
                queue,
            ]
            self.processes.start(Launch("worker", argv, env, label=queue))

    def _declarations(self, name: str) -> list[tuple[str, dict[str, Any]]]:
        main: dict[str, Any] = {
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": f"{name}.XQ",
        }
        if self.setup.queue_type == "quorum":
            main["x-queue-type"] = "quorum"
        return [(name, main), (f"{name}.DQ", main), (f"{name}.XQ", {"x-message-ttl": 604800000})]

    async def stop(self) -> list[str]:
        killed = await self.processes.stop()
        names = [n + suffix for n in (*self.queues, self.sink) for suffix in ("", ".DQ", ".XQ")]
        await delete_queues(self.setup.url, names)
        return killed
