"""The consuming side of the RabbitMQ transport: an actor's subscription and a client's reply
queue, and what the broker says about a delivery (`x-death`).

`RabbitMQSubscription` consumes one actor's queue on a channel of its own (its prefetch is the
actor's), through the underlying aiormq channel (no aio-pika message object and task per
delivery), and starts its consumer again when aio-pika has restored the channel after a
reconnect; pausing cancels the broker consumer but keeps the channel and what it holds, so no
delivery is given back (and counted) while an actor waits for its runtime. `RabbitMQReplyQueue`
is the exclusive queue a client waits on for final envelopes. Settling goes through the
transport (`asya.transport.rabbitmq`), which tracks every delivery it handed out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

import aio_pika
import aiormq
import aiormq.abc
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractQueue
from aiormq.abc import DeliveredMessage

from asya.errors import TransportError
from asya.transport.base import Death, DeathReason, Message
from asya.transport.rabbitmq_acks import ChannelAcks

if TYPE_CHECKING:
    from asya.transport.rabbitmq import RabbitMQTransport

log = logging.getLogger(__name__)

_GONE = (aiormq.exceptions.AMQPError, aio_pika.exceptions.ChannelInvalidStateError, RuntimeError)
"""What a consumer channel that is closed, or closing, raises."""


def death_of(headers: dict[str, Any] | None) -> Death | None:
    """The broker's most recent dead-lettering of a message, from its `x-death` header."""
    deaths = (headers or {}).get("x-death")
    if not isinstance(deaths, list) or not deaths or not isinstance(deaths[0], dict):
        return None
    latest = deaths[0]  # RabbitMQ keeps the most recent event first
    try:
        reason = DeathReason(str(latest.get("reason")))
    except ValueError:
        return None
    return Death(reason=reason, queue=str(latest.get("queue", "")))


class RabbitMQSubscription:
    """Consumes one actor's queue on a channel of its own (its prefetch is the actor's)."""

    def __init__(self, transport: RabbitMQTransport, actor: str) -> None:
        self._transport = transport
        self._actor = actor
        self._inbox: asyncio.Queue[Message | None] = asyncio.Queue()
        self._channel: AbstractChannel | None = None
        self._prefetch = 1
        self._queue: AbstractQueue | None = None
        self._consumer_tag: str | None = None
        self._tags: set[int] = set()
        """Our tags of the deliveries not settled yet (the transport drops each as settled)."""
        self._consuming_on: aiormq.abc.AbstractChannel | None = None
        self._acks: ChannelAcks | None = None
        """Settles the deliveries of the underlying channel they came on (the latest)."""

    async def start(self, prefetch: int) -> None:
        self._prefetch = prefetch
        channel = await self._transport.open_channel()
        await channel.set_qos(prefetch_count=prefetch)
        queue = await self._transport.declare_on(channel, self._actor)
        self._channel, self._queue = channel, queue
        if isinstance(channel, aio_pika.RobustChannel):
            # aio-pika restores the channel, its qos and the queue after a reconnect, but not a
            # consumer it did not start: this one is started again here.
            channel.reopen_callbacks.add(self._consume_again)
        await self._consume()

    async def _consume(self) -> None:
        # On the underlying aiormq channel: each delivery comes straight to `_deliver`, without
        # aio-pika's IncomingMessage and task of its own per delivery.
        assert self._channel is not None
        assert self._queue is not None
        underlay = await self._channel.get_underlay_channel()
        ok = await underlay.basic_consume(self._queue.name, self._deliver, no_ack=False)
        self._consumer_tag = ok.consumer_tag
        self._consuming_on = underlay

    async def _consume_again(self, _channel: object) -> None:
        if self._consumer_tag is None:
            return  # paused: `resume` consumes again
        self._consumer_tag = None
        try:
            await self._consume()
        except _GONE:
            log.warning("could not consume again after a reconnect", extra={"actor": self._actor})

    async def pause(self) -> None:
        """Cancel the broker consumer; deliveries already received stay unacked here."""
        if self._consuming_on is None or self._consumer_tag is None:
            return
        tag, self._consumer_tag = self._consumer_tag, None
        try:
            await self._consuming_on.basic_cancel(tag)
        except _GONE:
            log.debug("cancel on a closed channel", extra={"actor": self._actor})

    async def resume(self) -> None:
        """Consume again; on a new channel if the paused one is gone for good.

        Raises:
            TransportError: the broker would not take the consumer back now (try again).
        """
        if self._queue is None or self._consumer_tag is not None:
            return
        try:
            await self._consume()
            return
        except _GONE:
            log.warning(
                "consumer channel gone while paused; opening a new one",
                extra={"actor": self._actor},
            )
        # What was held on the old channel went back to the queue with it: its acks are lost
        # (logged) and those messages come again, at-least-once.
        old = self._channel
        if isinstance(old, aio_pika.RobustChannel):
            old.reopen_callbacks.discard(self._consume_again)
        try:
            await self.start(self._prefetch)
        except _GONE as exc:
            raise TransportError(f"cannot resume consuming '{self._actor}': {exc}") from exc
        if old is not None and not old.is_closed:
            with contextlib.suppress(aiormq.exceptions.AMQPError, RuntimeError):
                await old.close()

    async def _deliver(self, delivered: DeliveredMessage) -> None:
        underlay = delivered.channel
        acks = self._acks
        if acks is None or acks.channel is not underlay:
            # A first delivery, or the first on a channel reopened after a lost connection.
            acks = self._acks = ChannelAcks(underlay, self._actor)
        delivery_tag = delivered.delivery_tag
        assert delivery_tag is not None  # set when acking is on, as here
        acks.delivered(delivery_tag)
        headers = delivered.header.properties.headers
        message = Message(
            self._actor,
            delivered.body,
            self._transport.track(self._actor, delivery_tag, acks, self._tags),
            redelivered=bool(delivered.redelivered),
            death=death_of(headers) if headers else None,
        )
        self._inbox.put_nowait(message)

    async def get(self) -> Message | None:
        return await self._inbox.get()

    async def close(self) -> None:
        """Stop consuming; closing the channel gives back everything it still holds."""
        if self._acks is not None:
            await self._acks.flush()  # what is done stays done
        await self.pause()
        while not self._inbox.empty():
            message = self._inbox.get_nowait()
            if message is not None:
                await self._transport.requeue(message)
        self._inbox.put_nowait(None)
        if isinstance(self._channel, aio_pika.RobustChannel):
            self._channel.reopen_callbacks.discard(self._consume_again)
        if self._channel is not None and not self._channel.is_closed:
            await self._channel.close()
        for tag in list(self._tags):
            self._transport.forget(tag, self._actor)


class RabbitMQReplyQueue:
    """An exclusive reply queue (`asya-{namespace}.reply.{token}`) that a client waits on."""

    def __init__(self, queue: AbstractQueue, channel: AbstractChannel) -> None:
        self._queue = queue
        self._channel = channel
        self._inbox: asyncio.Queue[bytes] = asyncio.Queue()

    @property
    def name(self) -> str:
        return self._queue.name

    async def start(self) -> None:
        await self._queue.consume(self._deliver, no_ack=True)

    async def _deliver(self, incoming: AbstractIncomingMessage) -> None:
        self._inbox.put_nowait(incoming.body)

    async def receive(self) -> bytes:
        return await self._inbox.get()

    async def close(self) -> None:
        if not self._channel.is_closed:
            await self._channel.close()
