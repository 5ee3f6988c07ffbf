"""The in-memory transport keeps the promises every transport makes."""

from __future__ import annotations

import asyncio

import pytest

from asya.errors import TransportError, UnknownActorError
from asya.queue_names import queue_name
from asya.transport.base import QueueDepth
from asya.transport.memory import MemoryTransport


@pytest.fixture
async def transport():
    memory = MemoryTransport()
    await memory.declare("a")
    yield memory
    await memory.aclose()


async def test_a_published_message_is_consumed_once_and_gone_after_ack(transport):
    await transport.publish("a", b"one")
    subscription = await transport.subscribe("a", prefetch=1)

    message = await subscription.get()
    assert await transport.depth("a") == QueueDepth(ready=0, unacked=1)
    await subscription.ack(message)

    assert message.body == b"one"
    assert await transport.depth("a") == QueueDepth(ready=0, unacked=0)
    await subscription.close()


async def test_publishing_to_an_actor_without_a_queue_raises_instead_of_dropping(transport):
    with pytest.raises(UnknownActorError) as caught:
        await transport.publish("ghost", b"x")

    assert caught.value.actor == "ghost"


async def test_prefetch_bounds_what_a_subscription_holds(transport):
    for body in (b"1", b"2", b"3"):
        await transport.publish("a", body)
    subscription = await transport.subscribe("a", prefetch=2)
    first, second = await subscription.get(), await subscription.get()

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(subscription.get(), 0.05)
    await subscription.ack(first)
    third = await asyncio.wait_for(subscription.get(), 1)

    assert (first.body, second.body, third.body) == (b"1", b"2", b"3")
    await subscription.close()


async def test_a_requeued_message_comes_back_first_marked_redelivered(transport):
    await transport.publish("a", b"1")
    await transport.publish("a", b"2")
    subscription = await transport.subscribe("a", prefetch=1)
    first = await subscription.get()

    await subscription.requeue(first)
    again = await subscription.get()

    assert (again.body, again.redelivered) == (b"1", True)
    await subscription.close()


async def test_closing_a_subscription_gives_back_what_it_still_owns(transport):
    await transport.publish("a", b"1")
    subscription = await transport.subscribe("a", prefetch=1)
    await subscription.get()

    await subscription.close()

    assert await transport.depth("a") == QueueDepth(ready=1, unacked=0)


async def test_a_message_settled_twice_is_settled_once(transport):
    await transport.publish("a", b"1")
    subscription = await transport.subscribe("a", prefetch=1)
    message = await subscription.get()

    await subscription.ack(message)
    await subscription.requeue(message)
    await subscription.ack(message)

    assert await transport.depth("a") == QueueDepth(ready=0, unacked=0)
    await subscription.close()


async def test_only_the_subscription_that_delivered_a_message_settles_it(transport):
    await transport.publish("a", b"1")
    delivering = await transport.subscribe("a", prefetch=1)
    other = await transport.subscribe("a", prefetch=1)
    message = await delivering.get()

    await other.ack(message)
    await other.requeue(message)
    held = await transport.depth("a")
    await delivering.ack(message)

    assert held == QueueDepth(ready=0, unacked=1)
    assert await transport.depth("a") == QueueDepth(ready=0, unacked=0)
    await delivering.close()
    await other.close()


async def test_settling_after_close_leaves_the_message_it_gave_back_alone(transport):
    # Given: a message given back by its closed subscription and delivered again (same tag)
    await transport.publish("a", b"1")
    closed = await transport.subscribe("a", prefetch=1)
    message = await closed.get()
    await closed.close()
    again = await transport.subscribe("a", prefetch=1)
    redelivered = await again.get()

    # When: the closed subscription settles it late
    await closed.ack(message)
    await closed.requeue(message)

    # Then: the redelivery is still held by the subscription that has it
    assert (redelivered.tag, redelivered.redelivered) == (message.tag, True)
    assert await transport.depth("a") == QueueDepth(ready=0, unacked=1)
    await again.ack(redelivered)
    assert await transport.depth("a") == QueueDepth(ready=0, unacked=0)
    await again.close()


async def test_a_cancelled_get_takes_nothing_off_the_queue(transport):
    subscription = await transport.subscribe("a", prefetch=1)
    waiting = asyncio.create_task(subscription.get())
    await asyncio.sleep(0)

    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    await transport.publish("a", b"1")

    assert await transport.depth("a") == QueueDepth(ready=1, unacked=0)
    await subscription.close()


async def test_a_delayed_publish_arrives_after_its_delay_and_the_mesh_is_not_quiet_meanwhile(
    transport,
):
    await transport.publish("a", b"later", delay_ms=30)

    assert await transport.depth("a") == QueueDepth(ready=0, unacked=0)
    assert not transport.is_quiet()
    subscription = await transport.subscribe("a", prefetch=1)
    message = await asyncio.wait_for(subscription.get(), 2)

    assert message.body == b"later"
    await subscription.close()


async def test_join_waits_until_nothing_is_ready_unacked_or_delayed(transport):
    await transport.publish("a", b"1", delay_ms=10)
    subscription = await transport.subscribe("a", prefetch=1)

    async def consume():
        message = await subscription.get()
        await subscription.ack(message)

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(transport.join(), 2)

    assert transport.is_quiet()
    await consumer
    await subscription.close()


async def test_replies_reach_the_reply_queue_and_a_gone_one_is_ignored(transport):
    reply = await transport.open_reply_queue()

    await transport.publish_reply(reply.name, b"final")
    await transport.publish_reply(f"asya-local.reply.{'0' * 32}", b"lost on purpose")

    assert await asyncio.wait_for(reply.receive(), 1) == b"final"
    await reply.close()


async def test_a_closed_transport_refuses_to_publish(transport):
    await transport.aclose()

    with pytest.raises(TransportError):
        await transport.publish("a", b"x")


def test_queue_names_carry_the_namespace():
    assert queue_name("prod", "embed") == "asya.prod.embed"
