"""How many messages queues hold now, as the broker counts them: a passive declare each.

The management API's counts trail the queues by its statistics interval (seconds), too late
for a decision that deletes what holds them; a declare's answer is the queue's own. Ready
messages only (what no consumer holds); a queue that does not exist counts 0. A stream
answers 0 whatever it holds: ask the management API of streams.
"""

from __future__ import annotations

from collections.abc import Iterable

import aio_pika
import aiormq

from asya.errors import TransportError


async def messages_ready(url: str, queues: Iterable[str], *, timeout_s: float = 30) -> int:
    """Messages ready in `queues` of `url`'s vhost, summed.

    Raises:
        TransportError: the broker cannot be reached or refuses the credentials.
    """
    try:
        connection = await aio_pika.connect(url, timeout=timeout_s)
    except (aiormq.exceptions.AMQPError, ConnectionError, OSError) as exc:
        raise TransportError(f"cannot count messages: {exc!r}") from exc
    total = 0
    async with connection:
        for name in queues:
            channel = await connection.channel()
            try:
                declared = await channel.declare_queue(name, passive=True)
            except aiormq.exceptions.ChannelNotFoundEntity:
                continue  # gone: it holds nothing (its channel is closed by the broker)
            total += declared.declaration_result.message_count or 0
            await channel.close()
    return total
