"""Raw aio-pika: one process per hop (`bench.apps.raw_hop`), plain JSON, no framework; and the
same hop split over two processes as a pod is (`bench.apps.raw_split_hop`).

Queues are plain durable queues of the run's type (`x-queue-type`); the last hop publishes to
a sink queue. No dead-lettering, no delivery limit, no routing: the floor of what a hop costs,
in one process and in two.
"""

from __future__ import annotations

import json

import aio_pika

from bench.contenders.base import PYTHON, Setup
from bench.procs import Launch, ProcessGroup
from bench.traffic import Outgoing, Payload, json_payload


class RawWire:
    def __init__(self, queues: list[str]) -> None:
        self.exchange = ""
        self.routing_key = queues[0]
        self.done_queues = [queues[-1]]
        self._hops = queues[:-1]
        """Each hop adds its queue's name to the document."""
        self.failed_queues: list[str] = []

    def wrap(self, payload: Payload) -> Outgoing:
        return Outgoing(json.dumps(payload).encode())

    def unwrap(self, body: bytes) -> Payload:
        payload = json_payload(body)
        skipped = [hop for hop in self._hops if hop not in payload]
        if skipped:  # counted as unreadable: a hop passed it on without doing its work
            raise ValueError(f"not worked on by {', '.join(skipped)}")
        return payload


class RawAioPika:
    name = "raw-aio-pika"

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.queues = [f"{setup.prefix}-{hop}" for hop in setup.hop_names] + [
            f"{setup.prefix}-sink"
        ]
        self.wire = RawWire(self.queues)
        self.processes = ProcessGroup(setup.workdir)
        self.notes: list[str] = []

    async def start(self) -> None:
        connection = await aio_pika.connect(self.setup.url)
        async with connection:
            channel = await connection.channel()
            for name in self.queues:
                await channel.declare_queue(
                    name, durable=True, arguments={"x-queue-type": self.setup.queue_type}
                )
        for source, target in zip(self.queues, self.queues[1:], strict=False):
            self.launch(source, target)

    def launch(self, source: str, target: str) -> None:
        argv = [
            PYTHON,
            "-m",
            "bench.apps.raw_hop",
            self.setup.url,
            source,
            target,
            str(self.setup.inflight),
        ]
        self.processes.start(Launch("hop", argv, self.setup.env({}), label=source))

    async def stop(self) -> list[str]:
        killed = await self.processes.stop()
        await delete_queues(self.setup.url, self.queues)
        return killed


class RawSplit(RawAioPika):
    """Per hop, a raw aio-pika process that hands each body to a handler process of its own
    over a Unix socket: the floor of a hop whose handler runs beside its consumer."""

    name = "raw-split"

    def launch(self, source: str, target: str) -> None:
        module = "bench.apps.raw_split_hop"
        socket = str(self.setup.workdir / f"{source}.sock")
        env = self.setup.env({})
        self.processes.start(
            Launch("handler", [PYTHON, "-m", module, "handler", socket, source], env, label=source)
        )
        argv = [PYTHON, "-m", module, "broker", self.setup.url, source, target]
        argv += [str(self.setup.inflight), socket]
        self.processes.start(Launch("hop", argv, env, label=source))


async def delete_queues(url: str, names: list[str]) -> None:
    """Delete `names` (those that exist), on a connection of its own."""
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        for name in names:
            try:
                await channel.queue_delete(name)
            except aio_pika.exceptions.ChannelClosed:
                channel = await connection.channel()
