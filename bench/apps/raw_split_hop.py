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
import itertools
import os
import struct
import sys

from asya import event_loop
from bench.apps.hop_work import add_key, until_stopped

_HEADER = struct.Struct("!IQ")
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
    while True:  # the handler process starts beside this one; the run's timeout bounds this
        try:
            return await asyncio.open_unix_connection(path)
        except (FileNotFoundError, ConnectionRefusedError):
            await asyncio.sleep(0.05)


async def broker(url: str, source: str, target: str, prefetch: int, path: str) -> None:
    from bench.apps.raw_hop import serve  # the handler process imports no AMQP client

    reader, writer = await _connect(path)
    waiting: dict[int, asyncio.Future[bytes]] = {}
    ids = itertools.count(1)

    async def answers() -> None:
        while True:
            size, call = _HEADER.unpack(await reader.readexactly(_HEADER.size))
            body = await reader.readexactly(size)
            answer = waiting.pop(call)
            if not answer.done():  # its message's task was cancelled: the run is stopping
                answer.set_result(body)

    async def call(body: bytes) -> bytes:
        call_id = next(ids)
        answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        waiting[call_id] = answer
        writer.write(_HEADER.pack(len(body), call_id) + body)
        return await answer

    def handler_gone(reading: asyncio.Task[None]) -> None:
        # Every call would wait for ever: end the hop, so the run fails saying a process exited.
        if not reading.cancelled():
            print(f"raw_split_hop: lost the handler: {reading.exception()!r}", file=sys.stderr)
            os._exit(1)

    def stopping() -> None:
        # The handler process stops too (SIGTERM to both): its end is no failure any more.
        reading.remove_done_callback(handler_gone)

    reading = asyncio.create_task(answers())
    reading.add_done_callback(handler_gone)
    try:
        await serve(url, source, target, prefetch, call, stopping)
    finally:
        stopping()
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
