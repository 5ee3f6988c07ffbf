"""`reply_to` abuse: end actors answer only a reply queue a client declared in their namespace.

Every other `reply_to` (an end actor's queue, an actor's queue, another namespace's reply
queue, a name with a newline, 300 characters) is refused with a log line, nothing lands in the
queue it names, and the envelope is still recorded exactly once.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import msgspec

from tests.hostile.accounting import MALFORMED, valid


async def test_reply_to_is_answered_only_for_a_declared_reply_queue(feeder, caplog):
    caplog.set_level(logging.WARNING, logger="asya.crew.ends")
    await feeder.start("echo")
    transport = feeder.transport
    reply = await transport.open_reply_queue()
    token = uuid.uuid4().hex
    decoys = [f"asya-other.reply.{token}", transport.queue_for("") + f".reply.{token}"]
    own = f"asya-{transport.options.namespace}.reply.{token}"
    decoys.append(own)
    channel = await transport.open_channel()
    for name in decoys:
        await channel.declare_queue(name, durable=False, auto_delete=False)
    refused = [
        transport.queue_for("happy-end"),
        transport.queue_for("error-end"),
        transport.queue_for("echo"),
        transport.parking_queue,
        "x" * 300,
        decoys[0],
        decoys[1],
        own + "\n",
        own.upper(),
        own[:-1],
        "amq.rabbitmq.reply-to",
        "",
    ]
    inputs = [valid("answered", "echo", 1, headers={"reply_to": reply.name})]
    for i, name in enumerate(refused):
        headers = {"reply_to": name}
        inputs.append(valid(f"reply_to {name[:60]!r} at happy-end", "echo", i, headers=headers))
        inputs.append(
            valid(f"reply_to {name[:60]!r} at error-end", "nobody", i, MALFORMED, headers=headers)
        )

    result = await feeder.feed("echo", inputs)
    answer = msgspec.json.decode(await asyncio.wait_for(reply.receive(), 10))
    depths = [
        (await channel.declare_queue(name, passive=True)).declaration_result.message_count
        for name in decoys
    ]
    refusals = [r for r in caplog.records if r.getMessage().startswith("reply_to refused")]
    for name in decoys:
        await channel.queue_delete(name)
    await channel.close()
    await reply.close()

    assert result.problems == []
    assert (result.tried, result.recorded) == (25, 25)
    assert result.outcomes == {"happy-end": 13, "error-end:MalformedEnvelope": 12}
    assert answer["id"] == inputs[0].envelope_id
    assert depths == [0, 0, 0]
    assert len(refusals) == 22
