"""The RabbitMQ transport (aio-pika): the topology of DESIGN §6 and its guarantees.

Topology, declared idempotently by whoever needs it first (sidecar, client, local runner):
- exchange `asya` (direct, durable); queue `asya.{namespace}.{actor}` per actor, durable,
  quorum by default (classic as an option), bound with its own name as routing key;
- quorum queues carry a delivery limit: a message redelivered past it (one that keeps
  crashing its consumer) is dead-lettered — an actor's to `error-end`, which records it with
  the broker's reason; an end actor's to the namespace's parking queue. No queue dead-letters
  into itself or into a cycle;
- the parking queue `asya-{namespace}.parking` keeps what an end actor could not record
  (declared with the end actors' queues, so a dead-letter always has somewhere to go);
- retries wait in delay queues `asya.{namespace}.{actor}.retry-{ms}ms`: a per-queue TTL,
  then dead-lettered back to the actor's queue. Delays are rounded *down* to a fixed ladder
  (`DELAY_LADDER_MS`), so an actor needs only a handful of them and no retry waits longer
  than its policy asked;
- reply queues `asya-{namespace}.reply.{token}` are exclusive, declared by clients;
- the end records' streams `asya-{namespace}.results`, `.failures` and `.replays` are kept by
  `records` (`asya.transport.rabbitmq_records`).

Publishes are persistent, `mandatory` and confirmed: `publish` returns once the broker has
the message, many may be in flight on one channel, and a message no queue would take raises
`UnknownActorError` instead of vanishing. Each publish carries its own properties (its own
message id, which is how the broker's return of an unroutable message finds its publish).
A publish channel the broker closed is reopened on the next publish; `can_publish` says
whether publishing is possible now (the sidecar's readiness). The connection is aio-pika's
robust one: after a loss it reconnects with backoff and restores channels and queues (and
each subscription its consumer, `asya.transport.rabbitmq_consuming`); messages that were in
flight are redelivered by the broker (at-least-once), and their subscription's settling of
them on the dead channel is logged, not raised. aio-pika errors are wrapped as
`TransportError` here, at the edge.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final, cast

import aio_pika
import aiormq
from aio_pika.abc import (
    AbstractChannel,
    AbstractExchange,
    AbstractQueue,
    AbstractRobustConnection,
)

from asya.clock import Clock, SystemClock
from asya.errors import TransportError, UnknownActorError
from asya.queue_names import delay_queue_name, queue_name
from asya.routing import END_ACTORS, ERROR_END
from asya.settings import TRANSPORT_DEFAULTS, TransportSettings
from asya.transport.base import (
    QueueDepth,
    is_reply_queue_name,
    parking_queue_name,
    reply_queue_name,
)
from asya.transport.rabbitmq_consuming import RabbitMQReplyQueue, RabbitMQSubscription
from asya.transport.rabbitmq_failures import failed_by_a_close
from asya.transport.rabbitmq_records import RabbitMQRecordStore
from asya.transport.records import RecordKind, Retention, records_stream_name

log = logging.getLogger(__name__)

EXCHANGE: Final = "asya"


DELAY_LADDER_MS: Final = (
    10, 20, 50, 100, 200, 300, 500, 750, 1_000, 1_500, 2_000, 3_000, 5_000, 7_500, 10_000, 15_000,
    20_000, 30_000, 45_000, 60_000, 90_000, 120_000, 180_000, 300_000, 600_000, 900_000,
    1_800_000, 3_600_000,
)  # fmt: skip
"""Retry delays are rounded down to one of these; a delay under the first is no delay."""


class QueueType(enum.StrEnum):
    QUORUM = "quorum"
    """Replicated, with a delivery limit that stops poison messages (the default)."""
    CLASSIC = "classic"
    """Single-node; no delivery limit (a poison message is redelivered until fixed)."""


@dataclass(frozen=True, kw_only=True)
class RabbitMQOptions:
    namespace: str = "default"
    """Queues are `asya.{namespace}.{actor}`: apps and tests share a broker safely."""
    queue_type: QueueType = QueueType.QUORUM
    delivery_limit: int = 20
    """Redeliveries (quorum queues) before a message is dead-lettered to error-end."""
    connection_name: str = "asya"
    """Shown in the broker's management UI."""
    retention: Retention = field(default_factory=Retention)
    """How long and how much of the end records' streams is kept (`asya.transport.records`)."""
    ack_window_s: float = TRANSPORT_DEFAULTS.ack_window_ms / 1000
    """How long a consumer's ack may wait for others to go with (`asya.transport.rabbitmq_acks`)."""

    @classmethod
    def from_settings(
        cls, settings: TransportSettings, *, connection_name: str, namespace: str | None = None
    ) -> RabbitMQOptions:
        """The options the `ASYA_*` settings say (`namespace` overrides theirs)."""
        return cls(
            namespace=namespace or settings.namespace,
            queue_type=QueueType(settings.queue_type),
            delivery_limit=settings.delivery_limit,
            connection_name=connection_name,
            retention=Retention.from_settings(settings),
            ack_window_s=settings.ack_window_ms / 1000,
        )


def delay_bucket_ms(delay_ms: int) -> int:
    """The longest ladder step not over `delay_ms`; 0 (publish now) below the first step.

    Rounding down keeps `RetryPolicy.max_delay_ms` a true upper bound on RabbitMQ too.
    """
    return max((step for step in DELAY_LADDER_MS if step <= delay_ms), default=0)


def _properties() -> aiormq.spec.Basic.Properties:
    # A fresh object per publish: aiormq writes a random message id into the properties it is
    # given and matches a returned (unroutable) message to its publish by that id, so
    # properties shared between publishes sent returns to the wrong publish.
    return aiormq.spec.Basic.Properties(delivery_mode=2, content_type="application/json")


async def _connect_robust(url: str, client_properties: dict[str, Any]) -> AbstractRobustConnection:
    """`aio_pika.connect_robust`, but a connect cut short (cancelled, or its caller's bound
    reached while a broker never answers the handshake) closes the connection: aio-pika's own
    leaves its reconnect task trying for ever."""
    connection = aio_pika.RobustConnection(
        aio_pika.connection.make_url(url), client_properties=client_properties
    )
    try:
        await connection.connect()
    except BaseException:
        with contextlib.suppress(Exception):
            await connection.close()
        raise
    return connection


class RabbitMQTransport:
    """Transport over a RabbitMQ broker; see the module docstring."""

    def __init__(
        self, url: str, options: RabbitMQOptions | None = None, *, clock: Clock | None = None
    ) -> None:
        self._url = url
        self.options = options or RabbitMQOptions()
        self._records = RabbitMQRecordStore(
            self,
            namespace=self.options.namespace,
            exchange=EXCHANGE,
            retention=self.options.retention,
            clock=clock or SystemClock(),
        )
        self._connection: AbstractRobustConnection | None = None
        self._channel: AbstractChannel | None = None
        self._inspect: AbstractChannel | None = None
        self._exchange: AbstractExchange | None = None
        self._declared: set[str] = set()
        self._delay_queues: set[str] = set()
        self._tags = itertools.count(1)
        """Numbers every subscription's deliveries, so no two of them share a tag."""
        self._subscriptions: list[RabbitMQSubscription] = []
        self._reopening = asyncio.Lock()

    async def connect(self) -> None:
        """Connect, with the robust connection's reconnects from then on.

        Raises:
            TransportError: the broker is unreachable or refused the credentials.
        """
        try:
            self._connection = await _connect_robust(
                self._url, {"connection_name": self.options.connection_name}
            )
            await self._open_publish_channel()
        except aiormq.exceptions.ProbableAuthenticationError as exc:
            raise TransportError(
                f"the broker at {_safe(self._url)} refused the credentials: check the user and"
                " password in the broker URL"
            ) from exc
        except (TimeoutError, OSError, aiormq.exceptions.AMQPError) as exc:
            raise TransportError(
                f"cannot reach the broker at {_safe(self._url)}: {exc or type(exc).__name__}"
            ) from exc

    async def wait_connected(self) -> None:
        """Return once the connection is open: at once, or when a reconnect in progress ends.
        The channels it restores may follow a moment later. It waits for as long as the
        reconnect takes, and a close while it waits never ends it: bound it with a timeout.

        Raises:
            TransportError: connect() was never called, or the connection was closed before.
        """
        connection = self._connection
        if connection is None or connection.is_closed:
            raise TransportError("not connected: call connect() first")
        await connection.connected.wait()

    async def __aenter__(self) -> RabbitMQTransport:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def queue_for(self, actor: str) -> str:
        return queue_name(self.options.namespace, actor)

    @property
    def url(self) -> str:
        """The broker URL this transport connects to (with its credentials)."""
        return self._url

    @property
    def parking_queue(self) -> str:
        return parking_queue_name(self.options.namespace)

    @property
    def records(self) -> RabbitMQRecordStore:
        """The namespace's end records, on RabbitMQ streams."""
        return self._records

    @property
    def broker_version(self) -> str:
        """The broker's version as it announced it on connect ('unknown' before)."""
        if self._connection is None:
            return "unknown"
        underlay = self._connection.transport
        if underlay is None:  # not connected at this moment
            return "unknown"
        properties = underlay.connection.server_properties
        version = properties.get("version", b"unknown")
        return version.decode() if isinstance(version, bytes) else str(version)

    @property
    def can_publish(self) -> bool:
        connection = self._connection
        if connection is None or connection.is_closed or not connection.connected.is_set():
            return False
        return self._channel is not None and not self._channel.is_closed

    async def _open_publish_channel(self) -> AbstractChannel:
        assert self._connection is not None
        channel = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
        self._exchange = await channel.declare_exchange(
            EXCHANGE, aio_pika.ExchangeType.DIRECT, durable=True
        )
        self._channel = channel
        return channel

    async def _publisher(self) -> aiormq.abc.AbstractChannel:
        """The publish channel's underlying aiormq channel, reopened if the broker closed it.

        Raises:
            TransportError: not connected, or no channel can be opened now.
        """
        while True:
            channel = self._require_channel()
            if not channel.is_closed:
                try:
                    underlay = await channel.get_underlay_channel()
                    if not underlay.is_closed:
                        return underlay
                except (aiormq.exceptions.AMQPError, aio_pika.exceptions.ChannelInvalidStateError):
                    pass
            async with self._reopening:
                if self._channel is not channel:
                    continue  # another publish reopened it meanwhile: look again, lock released
                log.warning("publish channel closed by the broker; reopening")
                # Closed by us, the old robust channel stops restoring itself beside the new one.
                with contextlib.suppress(aiormq.exceptions.AMQPError, RuntimeError):
                    await channel.close()
                try:
                    opened = await self._open_publish_channel()
                    return await opened.get_underlay_channel()
                except (aiormq.exceptions.AMQPError, ConnectionError, RuntimeError) as exc:
                    raise TransportError(f"cannot reopen the publish channel: {exc}") from exc

    async def open_channel(self) -> AbstractChannel:
        if self._connection is None:
            raise TransportError("not connected: call connect() first")
        try:
            return await self._connection.channel()
        # aio-pika raises RuntimeError while the robust connection is between two connections.
        except (aiormq.exceptions.AMQPError, RuntimeError) as exc:
            raise TransportError(f"cannot open a channel: {exc}") from exc

    async def open_confirm_channel(self) -> AbstractChannel:
        """A channel of its own with publisher confirms (and returns of unroutable messages)."""
        if self._connection is None:
            raise TransportError("not connected: call connect() first")
        try:
            return await self._connection.channel(publisher_confirms=True, on_return_raises=True)
        except (aiormq.exceptions.AMQPError, RuntimeError) as exc:  # RuntimeError: as above
            raise TransportError(f"cannot open a channel: {exc}") from exc

    def _queue_arguments(self, actor: str) -> dict[str, Any]:
        # Whatever the broker dead-letters from an actor's queue is recorded at error-end; from
        # an end actor's queue it is parked. Both kinds dead-letter, so `expired` and `maxlen`
        # messages are never dropped, even on classic queues.
        if actor in END_ACTORS:
            target = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": self.parking_queue}
        else:
            target = {
                "x-dead-letter-exchange": EXCHANGE,
                "x-dead-letter-routing-key": self.queue_for(ERROR_END),
            }
        if self.options.queue_type is QueueType.CLASSIC:
            return target
        return {"x-queue-type": "quorum", "x-delivery-limit": self.options.delivery_limit, **target}

    async def declare_on(self, channel: AbstractChannel, actor: str) -> AbstractQueue:
        name = self.queue_for(actor)
        try:
            if actor in END_ACTORS:
                await self._declare_parking(channel)
            queue = await channel.declare_queue(
                name, durable=True, arguments=self._queue_arguments(actor)
            )
            await queue.bind(EXCHANGE, routing_key=name)
        except aiormq.exceptions.AMQPError as exc:
            raise TransportError(f"cannot declare queue {name}: {exc}") from exc
        self._declared.add(name)
        return queue

    async def _declare_parking(self, channel: AbstractChannel) -> None:
        # No delivery limit and no dead-lettering: the end of the line, kept until a person
        # (or `asya` tooling) looks at it.
        arguments: dict[str, Any] = (
            {} if self.options.queue_type is QueueType.CLASSIC else {"x-queue-type": "quorum"}
        )
        await channel.declare_queue(self.parking_queue, durable=True, arguments=arguments)
        self._declared.add(self.parking_queue)

    async def declare(self, actor: str) -> None:
        if self.queue_for(actor) not in self._declared:
            await self.declare_on(self._require_channel(), actor)

    def _require_channel(self) -> AbstractChannel:
        if self._channel is None:
            raise TransportError("not connected: call connect() first")
        return self._channel

    async def publish(self, actor: str, body: bytes, *, delay_ms: int = 0) -> None:
        # The underlying aiormq channel: same confirms and returns, without building an
        # aio-pika Message per publish (a measurable share of a hop's CPU). `wait=False`: the
        # channel is held only until the frame is queued, not until the writer has written it,
        # so the publishes of a burst of answers go together instead of one writer turn apart.
        # Each still waits for its confirm: what is held in memory is bounded, as before, by
        # the publishes in flight (the prefetch times the outputs per message).
        try:
            underlay = await self._publisher()
            bucket_ms = delay_bucket_ms(delay_ms)
            if bucket_ms > 0:
                exchange, key = "", await self._delay_queue(actor, bucket_ms)
            else:
                exchange, key = EXCHANGE, self.queue_for(actor)
            # aiormq's abstract channel does not name `wait`; the channel under aio-pika's is
            # always its concrete `Channel`, which takes it.
            await cast(aiormq.Channel, underlay).basic_publish(
                body,
                exchange=exchange,
                routing_key=key,
                properties=_properties(),
                mandatory=True,
                wait=False,
            )
        except aiormq.exceptions.PublishError as exc:
            raise UnknownActorError(
                f"no queue for actor '{actor}' ({self.queue_for(actor)} is not declared)",
                actor=actor,
            ) from exc
        except (aiormq.exceptions.AMQPError, aio_pika.exceptions.ChannelInvalidStateError) as exc:
            raise TransportError(f"publish to '{actor}' was not confirmed: {exc}") from exc
        except ConnectionError as exc:
            raise TransportError(f"publish to '{actor}' failed: the connection is down") from exc
        except BaseException as exc:
            if not failed_by_a_close(exc):
                raise
            raise TransportError(f"publish to '{actor}' failed: the connection closed") from exc

    async def park(self, body: bytes, *, reason: str) -> None:
        properties = _properties()
        properties.headers = {"x-asya-parked-reason": reason[:1000]}
        try:
            underlay = await self._publisher()
            await underlay.basic_publish(
                body,
                exchange="",
                routing_key=self.parking_queue,
                properties=properties,
                mandatory=True,
            )
        except (
            aiormq.exceptions.AMQPError,
            aio_pika.exceptions.ChannelInvalidStateError,
            ConnectionError,
        ) as exc:
            raise TransportError(f"cannot park a message: {exc}") from exc
        except BaseException as exc:
            if not failed_by_a_close(exc):
                raise
            raise TransportError("cannot park a message: the connection closed") from exc

    def delay_queue_for(self, actor: str, delay_ms: int) -> str:
        """The queue a retry of `actor` waits `delay_ms` in: `{its queue}.retry-{ms}ms`."""
        return delay_queue_name(self.options.namespace, actor, delay_ms)

    def queues_of(self, actor: str) -> list[str]:
        """The queues that are `actor`'s alone: its own and every delay queue it may use."""
        return [self.queue_for(actor), *(self.delay_queue_for(actor, d) for d in DELAY_LADDER_MS)]

    async def _delay_queue(self, actor: str, delay_ms: int) -> str:
        name = self.delay_queue_for(actor, delay_ms)
        if name not in self._delay_queues:
            await self._require_channel().declare_queue(
                name,
                durable=True,
                arguments={
                    "x-message-ttl": delay_ms,
                    "x-dead-letter-exchange": EXCHANGE,
                    "x-dead-letter-routing-key": self.queue_for(actor),
                },
            )
            self._delay_queues.add(name)
            self._declared.add(name)
        return name

    async def subscribe(self, actor: str, *, prefetch: int) -> RabbitMQSubscription:
        """Consume `actor`'s queue; the subscription settles what it delivers."""
        subscription = RabbitMQSubscription(
            self, actor, self._tags, ack_window_s=self.options.ack_window_s
        )
        await subscription.start(prefetch)
        self._subscriptions = [s for s in self._subscriptions if not s.closed]
        self._subscriptions.append(subscription)
        return subscription

    async def depth(self, actor: str) -> QueueDepth:
        """Ready messages as the broker counts them; unacked as this process holds them.

        Raises:
            UnknownActorError: the actor has no queue.
        """
        # A passive declare of a missing queue closes its channel: never the publish channel.
        if self._inspect is None or self._inspect.is_closed:
            self._inspect = await self.open_channel()
        try:
            # The robust channel caches declared queues and their counts: ask the broker.
            underlay = await self._inspect.get_underlay_channel()
            declared = await underlay.queue_declare(self.queue_for(actor), passive=True)
        except aiormq.exceptions.ChannelNotFoundEntity as exc:
            raise UnknownActorError(f"no queue for actor '{actor}'", actor=actor) from exc
        except (aiormq.exceptions.AMQPError, ConnectionError) as exc:
            raise TransportError(f"cannot read the depth of '{actor}': {exc}") from exc
        ready = declared.message_count or 0
        unacked = sum(s.unsettled for s in self._subscriptions if s.actor == actor)
        return QueueDepth(ready=ready, unacked=unacked)

    def is_reply_queue(self, name: str) -> bool:
        return is_reply_queue_name(self.options.namespace, name)

    async def open_reply_queue(self) -> RabbitMQReplyQueue:
        channel = await self.open_channel()
        name = reply_queue_name(self.options.namespace, uuid.uuid4().hex)
        try:
            queue = await channel.declare_queue(name, exclusive=True, auto_delete=True)
        except aiormq.exceptions.AMQPError as exc:
            raise TransportError(f"cannot declare a reply queue: {exc}") from exc
        reply = RabbitMQReplyQueue(queue, channel)
        await reply.start()
        return reply

    async def publish_reply(self, reply_to: str, body: bytes) -> None:
        if not self.is_reply_queue(reply_to):
            raise ValueError(
                f"'{reply_to}' is not a reply queue of namespace '{self.options.namespace}'"
            )
        try:
            underlay = await self._publisher()
            # Not mandatory: a client that gave up (its queue is gone) is not an error.
            await underlay.basic_publish(
                body, exchange="", routing_key=reply_to, properties=_properties()
            )
        except (
            aiormq.exceptions.AMQPError,
            aio_pika.exceptions.ChannelInvalidStateError,
            ConnectionError,
            TransportError,
        ) as exc:
            log.warning("reply not sent", extra={"reply_to": reply_to, "error": str(exc)})
        except BaseException as exc:
            if not failed_by_a_close(exc):
                raise
            log.warning("reply not sent: the connection closed", extra={"reply_to": reply_to})

    async def delete_queues(self, actors: Iterable[str]) -> None:
        """Delete these actors' queues, their delay queues, the parking queue and the records.

        For throwaway namespaces (test runs, `asya dev --broker`): the queues of a
        production namespace belong to its operator.
        """
        self._declared.add(self.parking_queue)
        self._declared.update(
            records_stream_name(self.options.namespace, kind) for kind in RecordKind
        )
        for actor in actors:
            self._declared.update(self.queues_of(actor))
        await self.delete_declared()

    async def delete_declared(self) -> None:
        """Delete every queue this transport declared."""
        channel = await self.open_channel()
        for name in sorted(self._declared):
            try:
                await channel.queue_delete(name)
            # aio-pika raises RuntimeError (ChannelInvalidStateError) on a channel it has closed.
            except (aiormq.exceptions.AMQPError, RuntimeError):
                channel = await self.open_channel()
        await channel.close()
        self._declared.clear()
        self._delay_queues.clear()

    async def aclose(self) -> None:
        await self._records.aclose()
        if self._connection is not None:
            await self._connection.close()
            self._connection = None


def _safe(url: str) -> str:
    """The URL without its password, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}{sep}{user}:***@{host}"
