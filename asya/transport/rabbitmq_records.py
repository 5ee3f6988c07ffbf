"""End records on RabbitMQ streams: the `RecordStore` of `asya.transport.records`.

One stream per log and namespace, `asya-{namespace}.results`, `.failures` and `.replays`
(`x-queue-type: stream`, kept by `x-max-age` and `x-max-length-bytes`, RabbitMQ 3.9+). Only
writers declare a stream with its retention (end actors at start, `asya replay` the ledger):
a reader declares passively, so a reader with other retention settings never clashes with
the stream, and a log that was never written reads as empty.

- `append` is a persistent, mandatory, confirmed publish to the stream through the default
  exchange, stamped with the time it was stored (header `asya-stored-at-ms`); the stream's
  offset comes back on delivery (`x-stream-offset`).
- `read` consumes with a prefetch and the `x-stream-offset` argument (`first`, an offset, or
  a timestamp: RabbitMQ starts at the chunk holding it, so earlier records of that chunk are
  dropped here by their stored time). A read that does not follow must end where the stream
  ended when it began, and a stream does not tell its last offset over AMQP 0-9-1: the
  reader attaches its consumer, then appends a *fence* (an empty record with header
  `asya-fence` and a fresh id), and reads until it meets its own fence. Fences are never
  yielded; they are tiny and age out with the rest. Reading therefore needs write permission
  on the stream. RabbitMQ waits for an offset past the end (where the fence would never be
  seen), so such a read starts at the first record and skips those before the offset.
- `resubmit` is ONE publish to exchange `asya` with the actor's queue as routing key and the
  ledger's routing key in the `CC` header (RabbitMQ's sender-selected distribution): the
  broker routes the one message to both queues and confirms it only when both have it, so the
  ledger holds exactly what was replayed. The ledger stream is bound to `asya` with its own
  name. The actor's queue is checked first (a passive declare): a message the ledger alone
  would take is never sent.

aio-pika errors become `TransportError` here, and a stream the broker cannot declare is a
`SettingsError` naming the broker version and the settings to change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import Any, Final, Protocol

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage

from asya.clock import Clock
from asya.errors import SettingsError, TransportError
from asya.settings import env_var
from asya.transport.base import QueueDepth
from asya.transport.rabbitmq_failures import failed_by_a_close
from asya.transport.records import FIRST, Record, RecordKind, Retention, Start, records_stream_name

log = logging.getLogger(__name__)

STORED_AT_HEADER: Final = "asya-stored-at-ms"
FENCE_HEADER: Final = "asya-fence"
OFFSET_HEADER: Final = "x-stream-offset"

_CHANNEL_ERRORS: Final = (
    aiormq.exceptions.AMQPError,
    aio_pika.exceptions.ChannelInvalidStateError,
    ConnectionError,
)


class RecordStoreTransport(Protocol):
    """What the record store needs of its transport; declared here, so that this module
    imports nothing of `asya.transport.rabbitmq`, which builds on it."""

    @property
    def broker_version(self) -> str:
        """The broker's version, for the message of a stream it cannot declare."""
        ...

    async def open_channel(self) -> AbstractChannel:
        """A new channel, for declares and reads that may close it."""
        ...

    async def open_confirm_channel(self) -> AbstractChannel:
        """A new channel with publisher confirms, for appends."""
        ...

    def queue_for(self, actor: str) -> str:
        """`actor`'s queue, where a replay is resubmitted."""
        ...

    async def depth(self, actor: str) -> QueueDepth:
        """`actor`'s queue depth.

        Raises:
            UnknownActorError: `actor` has no queue (a replay to it is not sent).
        """
        ...


class RabbitMQRecordStore:
    """End records on the streams of one namespace; see the module docstring."""

    def __init__(
        self,
        transport: RecordStoreTransport,
        *,
        namespace: str,
        exchange: str,
        retention: Retention,
        clock: Clock,
        prefetch: int = 256,
    ) -> None:
        self._transport = transport
        self._namespace = namespace
        self._exchange = exchange
        self._retention = retention
        self._clock = clock
        self._prefetch = prefetch
        self._declared: set[RecordKind] = set()
        self._channel: AbstractChannel | None = None
        self._opening = asyncio.Lock()

    def stream(self, kind: RecordKind) -> str:
        return records_stream_name(self._namespace, kind)

    async def declare(self, kind: RecordKind) -> None:
        if kind in self._declared:
            return
        name = self.stream(kind)
        # A declare the broker refuses closes its channel: never the publish channel.
        channel = await self._transport.open_channel()
        try:
            queue = await channel.declare_queue(
                name,
                durable=True,
                arguments={
                    "x-queue-type": "stream",
                    "x-max-age": self._retention.max_age,
                    "x-max-length-bytes": self._retention.max_bytes,
                },
            )
            if kind is RecordKind.REPLAYS:
                await queue.bind(self._exchange, routing_key=name)
        except aiormq.exceptions.AMQPError as exc:
            raise SettingsError(
                f"cannot declare the records stream {name} on RabbitMQ"
                f" {self._transport.broker_version}: {exc}. End records need RabbitMQ 3.9 or"
                " later with streams enabled (feature flag stream_queue): upgrade the broker."
                f" If the stream exists with another retention, set {env_var('records_max_age')}"
                f" and {env_var('records_max_bytes')} to its values (now"
                f" {self._retention.max_age!r} and {self._retention.max_bytes}), or delete it",
                variable=env_var("records_max_age"),
                value=self._retention.max_age,
            ) from exc
        finally:
            with contextlib.suppress(*_CHANNEL_ERRORS):
                if not channel.is_closed:
                    await channel.close()
        self._declared.add(kind)

    async def _publisher(self) -> aiormq.abc.AbstractChannel:
        async with self._opening:
            if self._channel is None or self._channel.is_closed:
                self._channel = await self._transport.open_confirm_channel()
            return await self._channel.get_underlay_channel()

    def _properties(self, headers: dict[str, Any]) -> aiormq.spec.Basic.Properties:
        stored_ms = int(self._clock.now().timestamp() * 1000)
        return aiormq.spec.Basic.Properties(
            delivery_mode=2,
            content_type="application/json",
            message_id=uuid.uuid4().hex,
            headers={STORED_AT_HEADER: stored_ms, **headers},
        )

    async def _publish(
        self, body: bytes, *, exchange: str, routing_key: str, headers: dict[str, Any]
    ) -> None:
        try:
            underlay = await self._publisher()
            await underlay.basic_publish(
                body,
                exchange=exchange,
                routing_key=routing_key,
                properties=self._properties(headers),
                mandatory=True,
            )
        except aiormq.exceptions.PublishError as exc:
            raise TransportError(f"{routing_key} did not take the record: {exc}") from exc
        except _CHANNEL_ERRORS as exc:
            raise TransportError(f"record for {routing_key} was not confirmed: {exc}") from exc
        except BaseException as exc:
            if not failed_by_a_close(exc):
                raise
            raise TransportError(f"record for {routing_key}: the connection closed") from exc

    async def append(self, kind: RecordKind, body: bytes) -> None:
        await self.declare(kind)
        await self._publish(body, exchange="", routing_key=self.stream(kind), headers={})

    async def resubmit(self, actor: str, body: bytes) -> None:
        await self.declare(RecordKind.REPLAYS)
        await self._transport.depth(actor)  # raises UnknownActorError: nothing is sent
        await self._publish(
            body,
            exchange=self._exchange,
            routing_key=self._transport.queue_for(actor),
            headers={"CC": [self.stream(RecordKind.REPLAYS)]},
        )

    async def read(
        self, kind: RecordKind, *, start: Start = FIRST, follow: bool = False
    ) -> AsyncGenerator[Record, None]:
        name = self.stream(kind)
        if follow:
            await self.declare(kind)
        elif not await self._exists(name):
            return
        fence = None if follow else uuid.uuid4().hex
        channel = await self._transport.open_channel()
        inbox: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()

        async def deliver(incoming: AbstractIncomingMessage) -> None:
            inbox.put_nowait(incoming)

        try:
            await channel.set_qos(prefetch_count=self._prefetch)
            queue = await channel.declare_queue(name, passive=True)
            where = _offset_argument(start if follow else Start(since=start.since))
            await queue.consume(deliver, arguments={OFFSET_HEADER: where})
            if fence is not None:
                # Written once the consumer is attached: a start past the end (an offset or a
                # time not reached yet) begins at the next record, which is then the fence.
                await self._publish(
                    b"", exchange="", routing_key=name, headers={FENCE_HEADER: fence}
                )
            while True:
                incoming = await inbox.get()
                await incoming.ack()
                headers = incoming.headers or {}
                marker = headers.get(FENCE_HEADER)
                if marker is not None:
                    if marker == fence:
                        return
                    continue
                record = _record(kind, incoming)
                if (start.since is None or record.stored_at >= start.since) and (
                    start.offset is None or record.offset >= start.offset
                ):
                    yield record
        except _CHANNEL_ERRORS as exc:
            raise TransportError(f"cannot read {name}: {exc}") from exc
        finally:
            with contextlib.suppress(*_CHANNEL_ERRORS):
                if not channel.is_closed:
                    await channel.close()

    async def _exists(self, name: str) -> bool:
        channel = await self._transport.open_channel()
        try:
            await channel.declare_queue(name, passive=True)
        except aiormq.exceptions.ChannelNotFoundEntity:
            return False
        except _CHANNEL_ERRORS as exc:
            raise TransportError(f"cannot look up {name}: {exc}") from exc
        finally:
            with contextlib.suppress(*_CHANNEL_ERRORS):
                if not channel.is_closed:
                    await channel.close()
        return True

    async def aclose(self) -> None:
        if self._channel is not None and not self._channel.is_closed:
            with contextlib.suppress(*_CHANNEL_ERRORS):
                await self._channel.close()


def _offset_argument(start: Start) -> int | str | datetime:
    if start.offset is not None:
        return start.offset
    if start.since is not None:
        # A timestamp in whole seconds: RabbitMQ starts at the chunk that holds it.
        return start.since.replace(microsecond=0)
    return "first"


def _record(kind: RecordKind, incoming: AbstractIncomingMessage) -> Record:
    headers = incoming.headers or {}
    offset = headers.get(OFFSET_HEADER)
    stored_ms = headers.get(STORED_AT_HEADER)
    stored_at = datetime.fromtimestamp(
        (stored_ms if isinstance(stored_ms, int) else 0) / 1000, tz=UTC
    )
    return Record(kind, offset if isinstance(offset, int) else -1, stored_at, incoming.body)
