"""What a raw hop does besides the broker: its work on a body, and its wait for SIGTERM.

Shared by `bench.apps.raw_hop` and `bench.apps.raw_split_hop`'s handler process, which imports
no AMQP client.
"""

from __future__ import annotations

import asyncio
import json
import signal


def add_key(body: bytes, key: str) -> bytes:
    """The hop's own work: the JSON document with `key` added."""
    doc = json.loads(body)
    doc[key] = 1
    return json.dumps(doc).encode()


async def until_stopped() -> None:
    """Return on SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
