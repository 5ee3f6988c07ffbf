"""One hop of the raw aio-pika pipeline: consume, publish with confirm, ack. Nothing else.

    python -m bench.apps.raw_hop URL SOURCE TARGET PREFETCH

What any correct consumer must do at the least, with no framework around it: the practical
ceiling of a hop. The message is acked only after its output is confirmed, as asya does; it
runs on the same event loop as asya's processes (uvloop when installed). Stops on SIGTERM.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

import aio_pika
from aio_pika.abc import AbstractIncomingMessage

from asya import event_loop
from bench.apps.hop_work import add_key, until_stopped

Work = Callable[[bytes], Awaitable[bytes]]
"""What a hop does to a message's body: the body it publishes on."""


async def serve(
    url: str,
    source: str,
    target: str,
    prefetch: int,
    work: Work,
    on_stop: Callable[[], None] = lambda: None,
) -> None:
    """Consume `source` until SIGTERM, publishing `work(body)` to `target`; `on_stop` is told
    when the stop begins."""
    connection = await aio_pika.connect_robust(url, client_properties={"connection_name": source})
    channel = await connection.channel(publisher_confirms=True)
    await channel.set_qos(prefetch_count=prefetch)
    queue = await channel.get_queue(source, ensure=False)
    exchange = channel.default_exchange

    async def handle(message: AbstractIncomingMessage) -> None:
        await exchange.publish(
            aio_pika.Message(
                await work(message.body),
                content_type="application/json",
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            ),
            routing_key=target,
            mandatory=True,
        )
        await message.ack()

    await queue.consume(handle)
    await until_stopped()
    on_stop()
    await connection.close()


def main() -> int:
    url, source, target, prefetch = sys.argv[1:5]

    async def work(body: bytes) -> bytes:
        return add_key(body, source)

    event_loop.run(serve(url, source, target, int(prefetch), work))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
