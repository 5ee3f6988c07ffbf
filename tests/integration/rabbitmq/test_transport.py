"""The RabbitMQ transport on a real broker: returns matched to their publish, channels that
come back, dead letters that always have somewhere to go."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aio_pika
import pytest

from asya.envelope import END_LIMITS, Reason, encode_envelope
from asya.errors import TransportError, UnknownActorError
from asya.routing import ERROR_END
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
from tests.factories import envelope


async def test_concurrent_unroutable_and_routable_publishes_each_get_their_own_answer(transport):
    await transport.declare("known")
    publishes = [transport.publish("ghost", b"u%d" % i) for i in range(40)]
    publishes += [transport.publish("known", b"r%d" % i) for i in range(40)]

    results = await asyncio.gather(*publishes, return_exceptions=True)

    unroutable = [r for r in results[:40] if isinstance(r, UnknownActorError)]
    assert len(unroutable) == 40
    assert results[40:] == [None] * 40
    assert (await transport.depth("known")).ready == 40


async def test_a_publish_channel_the_broker_closed_is_reopened_on_the_next_publish(transport):
    await transport.declare("known")
    # Stand-in for the broker closing the channel (as it does for a message over its size limit).
    underlay = await transport._channel.get_underlay_channel()
    await underlay.close()

    closed = transport.can_publish
    await transport.publish("known", b"after")

    assert closed is False
    assert transport.can_publish is True
    assert (await transport.depth("known")).ready == 1


async def _raw_publish(amqp_url, queue, body, **properties):
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        await channel.default_exchange.publish(aio_pika.Message(body, **properties), queue)


async def test_an_envelope_whose_ttl_runs_out_in_an_actor_queue_is_recorded_as_expired(
    transport, finals, amqp_url, actor_names
):
    actor_names.add("idle")
    await transport.declare("idle")  # nobody consumes it
    env = envelope("idle", id="expiring")

    await _raw_publish(
        amqp_url, transport.queue_for("idle"), encode_envelope(env, END_LIMITS), expiration=0
    )

    [record] = await finals.wait_for(1)
    assert record.id == "expiring"
    assert record.status.reason is Reason.EXPIRED
    assert transport.queue_for("idle") in record.status.error.message


async def test_an_end_actor_queue_dead_letters_to_the_parking_queue_not_to_itself(
    transport, amqp_url
):
    await transport.declare(ERROR_END)  # and the parking queue with it; nobody consumes either
    body = encode_envelope(envelope("a", id="parked"), END_LIMITS)

    await _raw_publish(amqp_url, transport.queue_for(ERROR_END), body, expiration=0)

    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        parking = await channel.get_queue(transport.parking_queue)
        async with parking.iterator() as messages:
            message = await asyncio.wait_for(anext(messages), 10)
            await message.ack()

    assert message.body == body
    assert message.headers["x-first-death-reason"] == "expired"


@pytest.mark.parametrize("reply_to", ["asya.x.happy-end", "amq.gen-abc"])
async def test_a_reply_to_that_no_client_declared_is_not_published_to(transport, reply_to):
    with pytest.raises(ValueError, match="is not a reply queue"):
        await transport.publish_reply(reply_to, b"{}")


async def test_a_paused_subscription_whose_channel_died_resumes_on_a_new_one(transport):
    await transport.declare("known")
    subscription = await transport.subscribe("known", prefetch=1)
    await subscription.pause()
    # Stand-in for the broker closing the consumer's channel while the actor was paused.
    await subscription._channel.close()

    await subscription.resume()
    await transport.publish("known", b"after the outage")
    message = await asyncio.wait_for(subscription.get(), 10)
    await subscription.ack(message)
    await subscription.close()

    assert message.body == b"after the outage"


async def test_concurrent_publishes_after_the_channel_closed_all_get_through(transport):
    await transport.declare("known")
    underlay = await transport._channel.get_underlay_channel()
    await underlay.close()

    await asyncio.wait_for(
        asyncio.gather(*(transport.publish("known", b"m%d" % i) for i in range(20))), 10
    )

    assert (await transport.depth("known")).ready == 20


async def test_acks_batched_with_a_requeue_among_them_settle_exactly_on_the_broker(transport):
    await transport.declare("known")
    for i in range(20):
        await transport.publish("known", b"m%d" % i)
    subscription = await transport.subscribe("known", prefetch=20)
    messages = [await asyncio.wait_for(subscription.get(), 10) for _ in range(20)]

    # All asked for in one loop iteration (one flush), the requeue in the middle of them,
    # and the subscription closed at once: nothing may be left unsent or wrongly covered.
    for message in messages:
        if message.body == b"m7":
            await subscription.requeue(message)
        else:
            await subscription.ack(message)
    held = subscription.unsettled  # what it would give back at close: nothing, all settled
    await subscription.close()

    again = await transport.subscribe("known", prefetch=20)
    back = await asyncio.wait_for(again.get(), 10)
    await again.ack(back)
    await again.close()
    assert held == 0
    assert back.body == b"m7"
    assert (await transport.depth("known")).ready == 0


@contextlib.asynccontextmanager
async def _windowed(amqp_url: str, namespace: str, count: int) -> AsyncIterator[RabbitMQTransport]:
    """A transport whose acks wait for a window that does not end during a test, and `count`
    messages in the queue of actor `known` (deleted after)."""
    options = RabbitMQOptions(
        namespace=namespace, connection_name="test-ack-window", ack_window_s=600
    )
    async with RabbitMQTransport(amqp_url, options) as windowed:
        await windowed.declare("known")
        for i in range(count):
            await windowed.publish("known", b"m%d" % i)
        try:
            yield windowed
        finally:
            await windowed.delete_queues(["known"])


async def test_acks_waiting_out_a_long_window_never_starve_the_prefetch(amqp_url, namespace):
    # A window that does not end during the test: the acks go with the hold (a quarter of the
    # prefetch) or when the consumer is out of deliveries with its prefetch full, and the
    # broker delivers past the first prefetch only if they went.
    async with _windowed(amqp_url, namespace, 15) as windowed:
        subscription = await windowed.subscribe("known", prefetch=8)

        bodies = []
        for _ in range(15):
            message = await asyncio.wait_for(subscription.get(), 10)
            bodies.append(message.body)
            await subscription.ack(message)
            await asyncio.sleep(0)  # each ack asked for in an iteration of its own
        await subscription.close()  # sends what still waits: nothing goes back to the queue
        left = (await windowed.depth("known")).ready

    assert sorted(bodies) == sorted(b"m%d" % i for i in range(15))
    assert left == 0


async def test_acks_wait_out_their_window_and_go_in_one_frame_when_closing(amqp_url, namespace):
    async with _windowed(amqp_url, namespace, 5) as windowed:
        subscription = await windowed.subscribe("known", prefetch=40)  # holds up to 10 acks
        messages = [await asyncio.wait_for(subscription.get(), 10) for _ in range(5)]

        for message in messages:
            await subscription.ack(message)
            await asyncio.sleep(0)  # each ack asked for in an iteration of its own
        acks = subscription._acks
        assert acks is not None
        # Out of deliveries, but the prefetch has room: the acks are not what the broker waits
        # for, and they keep waiting.
        waiting = asyncio.create_task(subscription.get())
        for _ in range(20):
            await asyncio.sleep(0)
        waiting.cancel()
        held = acks.frames
        await subscription.close()
        left = (await windowed.depth("known")).ready

    assert held == 0
    assert acks.frames == 1
    assert left == 0


async def test_a_consumer_out_of_deliveries_sends_the_acks_waiting_for_their_window(
    amqp_url, namespace
):
    async with _windowed(amqp_url, namespace, 9) as windowed:
        subscription = await windowed.subscribe("known", prefetch=8)  # holds 1 ack (hold 2)
        first = [await asyncio.wait_for(subscription.get(), 10) for _ in range(8)]

        # The prefetch is full: one acked, waiting for its window, and seven in work. Only
        # sending that ack now lets the broker deliver the ninth.
        await subscription.ack(first[0])
        ninth = await asyncio.wait_for(subscription.get(), 10)
        for message in [*first[1:], ninth]:
            await subscription.ack(message)
        await subscription.close()

    assert ninth.body == b"m8"


async def test_acks_after_resuming_on_a_new_channel_settle_there(transport):
    await transport.declare("known")
    subscription = await transport.subscribe("known", prefetch=4)
    await transport.publish("known", b"before")
    first = await asyncio.wait_for(subscription.get(), 10)
    await subscription.ack(first)
    await subscription.pause()
    await subscription._channel.close()  # the broker closed it while paused

    await subscription.resume()
    await transport.publish("known", b"after")
    second = await asyncio.wait_for(subscription.get(), 10)
    await subscription.ack(second)
    await subscription.close()

    assert (first.body, second.body) == (b"before", b"after")
    assert (await transport.depth("known")).ready == 0


async def test_only_the_subscription_that_delivered_a_message_settles_it(transport):
    # Given: two subscriptions, each holding the first message it was delivered
    await transport.declare("known")
    await transport.declare("other")
    delivering = await transport.subscribe("known", prefetch=1)
    other = await transport.subscribe("other", prefetch=1)
    await transport.publish("known", b"held")
    await transport.publish("other", b"its own")
    message = await asyncio.wait_for(delivering.get(), 10)
    own = await asyncio.wait_for(other.get(), 10)

    # When: the other one settles the message it did not deliver
    await other.ack(message)
    await other.requeue(message)

    # Then: both are still held where they were delivered, and each comes back when its
    # subscription closes
    held = [(await transport.depth(actor)).unacked for actor in ("known", "other")]
    await delivering.close()
    await other.close()
    back = []
    for actor in ("known", "other"):
        again = await transport.subscribe(actor, prefetch=1)
        back.append(await asyncio.wait_for(again.get(), 10))
        await again.ack(back[-1])
        await again.close()
    assert held == [1, 1]
    assert [(m.body, m.redelivered) for m in back] == [(b"held", True), (b"its own", True)]
    assert own.body == b"its own"


async def test_settling_after_close_is_harmless_and_the_message_comes_back(transport):
    await transport.declare("known")
    subscription = await transport.subscribe("known", prefetch=1)
    await transport.publish("known", b"given back")
    message = await asyncio.wait_for(subscription.get(), 10)
    await subscription.close()
    kept = subscription.unsettled  # all given back with the channel

    await subscription.ack(message)
    await subscription.requeue(message)

    again = await transport.subscribe("known", prefetch=1)
    back = await asyncio.wait_for(again.get(), 10)
    held = (await transport.depth("known")).unacked
    await again.ack(back)
    await again.close()
    assert kept == 0
    assert (back.body, back.redelivered) == (b"given back", True)
    assert held == 1


async def test_waiting_for_the_connection_returns_when_open_and_refuses_when_never_opened(
    transport, amqp_url
):
    options = RabbitMQOptions(namespace=transport.options.namespace)
    never_opened = RabbitMQTransport(amqp_url, options)

    await transport.wait_connected()

    with pytest.raises(TransportError, match=r"call connect\(\) first"):
        await never_opened.wait_connected()
