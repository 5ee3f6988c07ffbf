"""AMQP properties asya does not set, on messages put straight on an actor's queue; and the
broker's own dead-lettering, recorded at `error-end` with the broker's reason.

asya reads only the body and the broker's `x-death` header. Every other property is ignored:
the envelope goes its way. A forged `x-death` on a message published to an actor is ignored
too (the actor does not read it). Published straight to `error-end`, a forged `x-death` is
believed: whoever can publish there can write any failed status anyway, and the envelope is
still recorded exactly once.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import aio_pika

from asya.envelope import Reason
from tests.hostile.accounting import Hostile, failed, raw, valid

FORGED_DEATH = [{"reason": "expired", "queue": "asya-x-y", "count": 1, "exchange": "asya"}]


def odd_properties(happy_end: str, echo: str) -> dict[str, dict]:
    """aio-pika `Message` arguments, by label; `happy_end` and `echo` are queue names."""
    return {
        "no content type": {"content_type": None},
        "text/plain": {"content_type": "text/plain"},
        "application/xml": {"content_type": "application/xml"},
        "gzip content encoding": {"content_encoding": "gzip"},
        "transient delivery mode": {"delivery_mode": aio_pika.DeliveryMode.NOT_PERSISTENT},
        "priority 9": {"priority": 9},
        "priority 255": {"priority": 255},
        "a 60 s expiration": {"expiration": 60},
        "a correlation id": {"correlation_id": "c" * 255},
        "an odd message id": {"message_id": "../../etc/passwd\n"},
        "a type and app id": {"type": "evil", "app_id": "mallory"},
        "a timestamp in 1970": {"timestamp": datetime(1970, 1, 1, tzinfo=UTC)},
        "an AMQP reply_to of happy-end": {"reply_to": happy_end},
        "a forged x-death": {"headers": {"x-death": FORGED_DEATH}},
        "an x-death that is a string": {"headers": {"x-death": "expired"}},
        "an x-death with a bogus reason": {"headers": {"x-death": [{"reason": "bogus"}]}},
        "headers of every type": {
            "headers": {
                "i": 1,
                "f": 1.5,
                "b": True,
                "n": None,
                "l": [1, "a"],
                "t": {"k": "v"},
                "d": datetime(2000, 1, 1, tzinfo=UTC),
            }
        },
        "an AMQP reply_to header": {"headers": {"reply_to": happy_end}},
        "a CC of its own queue": {"headers": {"CC": [echo]}},
    }


async def test_amqp_properties_asya_does_not_set_are_ignored(feeder):
    await feeder.start("echo")
    queues = feeder.transport.queue_for("happy-end"), feeder.transport.queue_for("echo")
    inputs = []
    for label, properties in odd_properties(*queues).items():
        item = valid(label, "echo", {"label": label})
        inputs.append(Hostile(label, item.body, item.expect, item.envelope_id, properties))

    result = await feeder.feed("echo", inputs)

    assert result.problems == []
    assert (result.tried, result.recorded) == (19, 19)
    assert result.outcomes == {"happy-end": 19}


async def test_what_the_broker_dead_letters_from_an_actor_is_recorded_with_its_reason(feeder):
    await feeder.start("echo")
    await feeder.declare_idle("idle")
    expired = valid("expired in an idle queue", "idle", 1, failed(Reason.EXPIRED))
    object.__setattr__(expired, "properties", {"expiration": 0.001})
    rejected = valid("rejected by a foreign consumer", "idle", 2, failed(Reason.REJECTED))
    limited = valid("requeued past the delivery limit", "idle", 3, LIMITED)

    await feeder.publish("idle", expired)
    await feeder.finals.wait_until(
        lambda: expired.key in {e.id for e in feeder.finals.envelopes}, 30
    )
    channel = await feeder.transport.open_channel()
    await channel.set_qos(prefetch_count=1)
    queue = await channel.get_queue(feeder.transport.queue_for("idle"), ensure=False)
    inbox: asyncio.Queue = asyncio.Queue()
    await queue.consume(inbox.put)
    await feeder.publish("idle", rejected)
    message = await _next(inbox)
    await message.reject(requeue=False)
    await feeder.publish("idle", limited)
    deliveries = 0
    while (message := await _next(inbox, timeout_s=2)) is not None:
        deliveries += 1
        await message.nack(requeue=True)
    result = await feeder.account([expired, rejected, limited], probe="echo")
    await channel.close()

    assert result.problems == []
    assert (result.tried, result.recorded) == (3, 3)
    assert deliveries == 21


async def test_forged_and_missing_failures_published_to_error_end_are_recorded_once(feeder):
    await feeder.start("echo")
    forged = valid("a forged x-death", "echo", 1, failed(Reason.EXPIRED))
    object.__setattr__(forged, "properties", {"headers": {"x-death": FORGED_DEATH}})
    bogus = valid("a bogus x-death", "echo", 2, failed(Reason.NO_FAILURE_RECORDED))
    object.__setattr__(bogus, "properties", {"headers": {"x-death": [{"reason": "bogus"}]}})
    inputs = [
        forged,
        bogus,
        valid("a pending envelope", "echo", 3, failed(Reason.NO_FAILURE_RECORDED)),
        valid(
            "a failed envelope",
            "echo",
            4,
            failed(Reason.TIMEOUT),
            status={"phase": "failed", "reason": "Timeout"},
        ),
        raw("garbage", b"\xff garbage at error-end"),
    ]

    result = await feeder.feed("error-end", inputs, probe="echo")

    assert result.problems == []
    assert (result.tried, result.recorded) == (5, 5)


async def test_garbage_and_failures_published_to_happy_end_are_recorded_once(feeder):
    await feeder.start("echo")
    inputs = [
        raw("garbage", b"\xff garbage at happy-end"),
        valid("a pending envelope", "echo", 1),
        valid(
            "a failed envelope",
            "echo",
            2,
            failed(Reason.HANDLER_ERROR),
            status={"phase": "failed", "reason": "HandlerError"},
        ),
    ]

    result = await feeder.feed("happy-end", inputs, probe="echo")

    assert result.problems == []
    assert (result.tried, result.recorded) == (3, 3)


LIMITED = failed(Reason.DELIVERY_LIMIT_EXCEEDED)


async def _next(inbox: asyncio.Queue, timeout_s: float = 10):
    """The next message a foreign consumer got, or None when none comes within `timeout_s`."""
    try:
        return await asyncio.wait_for(inbox.get(), timeout_s)
    except TimeoutError:
        return None
