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
import struct
import sys

from asya import event_loop
from bench.apps.raw_hop import add_key, serve, until_stopped

_HEADER = struct.Struct("!II")
"""Body length and call id, before each frame's body, both ways."""


async def handler(path: str, key: str) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size, call = _HEADER.unpack(await reader.readexactly(_HEADER.size))
                body = add_key(await reader.readexactly(size), key)
                writer.write(_HEADER.pack(len(body), call) + body)
        except asyncio.IncompleteReadError:
            writer.close()

    server = await asyncio.start_unix_server(answer, path=path)
    async with server:
        await until_stopped()


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
    try:
        await serve(url, source, target, prefetch, call)
    finally:
        reading.cancel()


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
