"""One hop of the raw aio-pika pipeline, split over two processes as a pod is.

    python -m bench.apps.raw_split_hop handler SOCKET KEY
    python -m bench.apps.raw_split_hop broker URL SOURCE TARGET PREFETCH SOCKET

The `broker` process is `bench.apps.raw_hop`, except that it hands each message's body to the
`handler` process over a Unix socket and publishes what comes back; the handler process adds
its key to the JSON document. Calls are pipelined (up to PREFETCH in flight) and matched by
id: no framework, no envelope, no checks. What it measures is the least a hop costs when its
handler runs in a process of its own, as asya's runtime does beside its sidecar: the floor of
any pod design, against which `raw-aio-pika` (one process per hop) is the floor of all.
"""

from __future__ import annotations

import asyncio
import json
import signal
import struct
import sys

import aio_pika
from aio_pika.abc import AbstractIncomingMessage

from asya import event_loop

_HEADER = struct.Struct("!II")
"""Body length and call id, before each frame's body, both ways."""


async def _until_stopped() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()


async def handler(path: str, key: str) -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size, call = _HEADER.unpack(await reader.readexactly(_HEADER.size))
                doc = json.loads(await reader.readexactly(size))
                doc[key] = 1
                body = json.dumps(doc).encode()
                writer.write(_HEADER.pack(len(body), call) + body)
        except asyncio.IncompleteReadError:
            writer.close()

    server = await asyncio.start_unix_server(serve, path=path)
    async with server:
        await _until_stopped()


async def _connect(path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    for _ in range(200):  # the handler process starts beside this one: give it 10 s
        try:
            return await asyncio.open_unix_connection(path)
        except (FileNotFoundError, ConnectionRefusedError):
            await asyncio.sleep(0.05)
    return await asyncio.open_unix_connection(path)


async def broker(url: str, source: str, target: str, prefetch: int, path: str) -> None:
    reader, writer = await _connect(path)
    waiting: dict[int, asyncio.Future[bytes]] = {}
    next_id = 0

    async def answers() -> None:
        while True:
            size, call = _HEADER.unpack(await reader.readexactly(_HEADER.size))
            waiting.pop(call).set_result(await reader.readexactly(size))

    async def call(body: bytes) -> bytes:
        nonlocal next_id
        next_id += 1
        answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        waiting[next_id] = answer
        writer.write(_HEADER.pack(len(body), next_id) + body)
        return await answer

    reading = asyncio.create_task(answers())
    connection = await aio_pika.connect_robust(url, client_properties={"connection_name": source})
    channel = await connection.channel(publisher_confirms=True)
    await channel.set_qos(prefetch_count=prefetch)
    queue = await channel.get_queue(source, ensure=False)
    exchange = channel.default_exchange

    async def handle(message: AbstractIncomingMessage) -> None:
        await exchange.publish(
            aio_pika.Message(
                await call(message.body),
                content_type="application/json",
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            ),
            routing_key=target,
            mandatory=True,
        )
        await message.ack()

    await queue.consume(handle)
    await _until_stopped()
    reading.cancel()
    await connection.close()


def main() -> int:
    role, *args = sys.argv[1:]
    if role == "handler":
        event_loop.run(handler(args[0], args[1]))
    else:
        url, source, target, prefetch, path = args
        event_loop.run(broker(url, source, target, int(prefetch), path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
