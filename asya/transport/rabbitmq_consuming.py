"""The consuming side of the RabbitMQ transport: an actor's subscription and a client's reply
queue, and what the broker says about a delivery (`x-death`).

`RabbitMQSubscription` consumes one actor's queue on a channel of its own (its prefetch is the
actor's), through the underlying aiormq channel (no aio-pika message object and task per
delivery), and starts its consumer again when aio-pika has restored the channel after a
reconnect; pausing cancels the broker consumer but keeps the channel and what it holds, so no
delivery is given back (and counted) while an actor waits for its runtime. `RabbitMQReplyQueue`
is the exclusive queue a client waits on for final envelopes.

A subscription settles what it delivered itself: it keeps its unsettled deliveries under tags
its transport numbers for all its subscriptions (the broker's repeat across channels, and
start again on a channel reopened after a reconnect), each with the `ChannelAcks` of the
channel it came on. Of its transport it needs only a channel and its actor's queue declared
on it (`SubscriptionTransport`), so this module imports nothing of `asya.transport.rabbitmq`,
which builds on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import aio_pika
import aiormq
import aiormq.abc
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractQueue
from aiormq.abc import DeliveredMessage

from asya.errors import TransportError
from asya.transport.base import Death, DeathReason, Message
from asya.transport.rabbitmq_acks import ChannelAcks

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


class SubscriptionTransport(Protocol):
    """What a subscription needs of its transport: channels, and its queue declared on one."""

    async def open_channel(self) -> AbstractChannel:
        """A new channel on the transport's connection.

        Raises:
            TransportError: not connected, or the broker would not open one.
        """
        ...

    async def declare_on(self, channel: AbstractChannel, actor: str) -> AbstractQueue:
        """`actor`'s queue, declared (idempotently) on `channel`.

        Raises:
            TransportError: the broker refused the declare.
        """
        ...


@dataclass(frozen=True, slots=True)
class _Delivery:
    """A delivery handed out and not settled yet."""

    tag: int
    """The broker's delivery tag, on the channel `acks` settles."""
    acks: ChannelAcks


class RabbitMQSubscription:
    """Consumes one actor's queue on a channel of its own (its prefetch is the actor's)."""

    def __init__(
        self,
        transport: SubscriptionTransport,
        actor: str,
        tags: Iterator[int],
        *,
        ack_window_s: float = 0.0,
    ) -> None:
        """`tags` numbers the deliveries: shared by a transport's subscriptions, so a message
        one of them delivered is never taken for another's. `ack_window_s`: how long an ack
        may wait for others to go in the same frame (`ChannelAcks`)."""
        self._transport = transport
        self._ack_window_s = ack_window_s
        self._actor = actor
        self._tags = tags
        self._inbox: asyncio.Queue[Message | None] = asyncio.Queue()
        self._channel: AbstractChannel | None = None
        self._prefetch = 1
        self._queue: AbstractQueue | None = None
        self._consumer_tag: str | None = None
        self._unsettled: dict[int, _Delivery] = {}
        """The deliveries handed out and not settled yet, by our tag (`Message.tag`)."""
        self._consuming_on: aiormq.abc.AbstractChannel | None = None
        self._acks: ChannelAcks | None = None
        """Settles the deliveries of the underlying channel they came on (the latest)."""
        self._closed = False

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
            # Acks wait for company no longer than the window, and never while a quarter of
            # the prefetch waits with them: the broker would hold back deliveries for them.
            acks = self._acks = ChannelAcks(
                underlay, self._actor, window_s=self._ack_window_s, hold=self._prefetch // 4
            )
        delivery_tag = delivered.delivery_tag
        assert delivery_tag is not None  # set when acking is on, as here
        acks.delivered(delivery_tag)
        tag = next(self._tags)
        self._unsettled[tag] = _Delivery(delivery_tag, acks)
        headers = delivered.header.properties.headers
        message = Message(
            self._actor,
            delivered.body,
            tag,
            redelivered=bool(delivered.redelivered),
            death=death_of(headers) if headers else None,
        )
        self._inbox.put_nowait(message)

    async def get(self) -> Message | None:
        acks = self._acks
        if self._inbox.empty() and acks is not None and acks.unsettled >= self._prefetch:
            # Out of deliveries, and the broker sends none until something is settled: the
            # acks waiting for their window go now.
            acks.send_waiting()
        return await self._inbox.get()

    @property
    def actor(self) -> str:
        """The actor whose queue it consumes."""
        return self._actor

    @property
    def closed(self) -> bool:
        """Whether `close` has run: it holds nothing any more."""
        return self._closed

    @property
    def unsettled(self) -> int:
        """Deliveries this subscription holds, handed out or not yet: unacked on the broker."""
        return len(self._unsettled)

    async def ack(self, message: Message) -> None:
        """Ack within the ack window, with the other acks of its channel
        (`asya.transport.rabbitmq_acks`): a channel lost before is logged there."""
        delivery = self._unsettled.pop(message.tag, None)
        if delivery is not None:
            delivery.acks.ack(delivery.tag)

    async def requeue(self, message: Message) -> None:
        delivery = self._unsettled.pop(message.tag, None)
        if delivery is None:
            return
        try:
            await delivery.acks.nack(delivery.tag)
        except (aiormq.exceptions.AMQPError, aio_pika.exceptions.ChannelInvalidStateError):
            log.warning("requeue lost with its channel", extra={"actor": self._actor})

    async def close(self) -> None:
        """Stop consuming; closing the channel gives back everything it still holds."""
        if self._acks is not None:
            await self._acks.flush()  # what is done stays done
        await self.pause()
        while not self._inbox.empty():
            message = self._inbox.get_nowait()
            if message is not None:
                await self.requeue(message)
        self._inbox.put_nowait(None)
        if isinstance(self._channel, aio_pika.RobustChannel):
            self._channel.reopen_callbacks.discard(self._consume_again)
        if self._acks is not None:
            await self._acks.flush()  # and what was acked meanwhile
        if self._channel is not None and not self._channel.is_closed:
            await self._channel.close()
        # The rest went back to the queue with the channel: a settle from now on does nothing.
        self._unsettled.clear()
        self._closed = True


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
