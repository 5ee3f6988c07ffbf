"""One hop of the raw aio-pika pipeline: consume, publish with confirm, ack. Nothing else.

    python -m bench.apps.raw_hop URL SOURCE TARGET PREFETCH

What any correct consumer must do at the least, with no framework around it: the practical
ceiling of a hop. The message is acked only after its output is confirmed, as asya does; it
runs on the same event loop as asya's processes (uvloop when installed). Stops on SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys

import aio_pika
from aio_pika.abc import AbstractIncomingMessage

from asya import event_loop


async def serve(url: str, source: str, target: str, prefetch: int) -> None:
    connection = await aio_pika.connect_robust(url, client_properties={"connection_name": source})
    channel = await connection.channel(publisher_confirms=True)
    await channel.set_qos(prefetch_count=prefetch)
    queue = await channel.get_queue(source, ensure=False)
    exchange = channel.default_exchange

    async def handle(message: AbstractIncomingMessage) -> None:
        doc = json.loads(message.body)
        doc[source] = 1
        await exchange.publish(
            aio_pika.Message(
                json.dumps(doc).encode(),
                content_type="application/json",
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            ),
            routing_key=target,
            mandatory=True,
        )
        await message.ack()

    await queue.consume(handle)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await connection.close()


def main() -> int:
    url, source, target, prefetch = sys.argv[1:5]
    event_loop.run(serve(url, source, target, int(prefetch)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
