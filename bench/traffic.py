"""The one publisher and the one sink every contender is measured with.

Both live in the benchmark's own process on their own connection. The publisher sends each
contender's messages persistent, `mandatory` and with publisher confirms, on one channel, many
in flight at once. What differs between contenders is only the format of the message (an asya
envelope, a Dramatiq or Celery message, plain JSON) — each contender's `Wire` says how to build
one around a payload and how to read the payload back — not how or when it is sent.

Every payload carries `phase` and `seq` (which message of which batch it is), `t0` (stamped
with `time.perf_counter()` just before its publish, for latency; the sink runs in the same
process, so the clocks agree) and `pad` (the payload size). The sink consumes the contender's
final queue (and its failure queue, if it has one) without acks — it only measures — and
records when each message arrived, counting duplicates and failures.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import aio_pika
from aio_pika.abc import (
    AbstractChannel,
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractRobustConnection,
)

Payload = dict[str, Any]


@dataclass(frozen=True)
class Outgoing:
    """A message as a contender's consumers expect to find it in their queue."""

    body: bytes
    headers: dict[str, Any] = field(default_factory=dict)
    content_type: str = "application/json"
    content_encoding: str | None = None
    correlation_id: str | None = None


class Wire(Protocol):
    """How a contender's messages look: where the first goes, how to wrap and unwrap a payload."""

    @property
    def exchange(self) -> str:
        """Where the first message is published ('' for the default exchange)."""
        ...

    @property
    def routing_key(self) -> str: ...

    @property
    def done_queues(self) -> Sequence[str]:
        """Where messages arrive when they went through every hop."""
        ...

    @property
    def failed_queues(self) -> Sequence[str]:
        """Where messages that failed on the way arrive (empty: the contender has none)."""
        ...

    def wrap(self, payload: Payload) -> Outgoing: ...

    def unwrap(self, body: bytes) -> Payload: ...


def payload(phase: str, seq: int, pad: str) -> Payload:
    """A payload of the given batch, stamped now."""
    return {"phase": phase, "seq": seq, "t0": time.perf_counter(), "pad": pad}


class Publisher:
    """Publishes a contender's messages: persistent, mandatory, confirmed."""

    def __init__(self, channel: AbstractChannel, exchange: AbstractExchange, wire: Wire) -> None:
        self._channel = channel
        self._exchange = exchange
        self._wire = wire

    @classmethod
    async def open(cls, connection: AbstractRobustConnection, wire: Wire) -> Publisher:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        exchange = (
            await channel.get_exchange(wire.exchange, ensure=False)
            if wire.exchange
            else channel.default_exchange
        )
        return cls(channel, exchange, wire)

    async def publish(self, message: Outgoing) -> None:
        await self._exchange.publish(
            aio_pika.Message(
                message.body,
                headers=message.headers,
                content_type=message.content_type,
                content_encoding=message.content_encoding,
                correlation_id=message.correlation_id,
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            ),
            routing_key=self._wire.routing_key,
            mandatory=True,
        )

    async def publish_all(self, messages: Sequence[Outgoing]) -> None:
        """All at once: every publish is in flight before the first confirm is awaited."""
        await asyncio.gather(*(self.publish(m) for m in messages))

    async def publish_stamped(self, phase: str, seq: int, pad: str) -> None:
        """Stamp the payload, wrap it and publish it at once (for latency)."""
        await self.publish(self._wire.wrap(payload(phase, seq, pad)))

    async def close(self) -> None:
        await self._channel.close()


@dataclass
class Arrival:
    at: float
    t0: float


class Sink:
    """Records what reaches a contender's final and failure queues."""

    def __init__(self, channel: AbstractChannel, wire: Wire) -> None:
        self._channel = channel
        self._wire = wire
        self.arrived: dict[tuple[str, int], Arrival] = {}
        self.failed: dict[tuple[str, int], Payload] = {}
        self.duplicates = 0
        self.unreadable = 0
        self._changed = asyncio.Condition()
        self._tags: list[tuple[Any, str]] = []

    @classmethod
    async def open(cls, connection: AbstractRobustConnection, wire: Wire) -> Sink:
        sink = cls(await connection.channel(), wire)
        for name in wire.done_queues:
            await sink._consume(name, sink._on_done)
        for name in wire.failed_queues:
            await sink._consume(name, sink._on_failed)
        return sink

    async def _consume(
        self, name: str, on_message: Callable[[AbstractIncomingMessage], Any]
    ) -> None:
        queue = await self._channel.get_queue(name, ensure=False)
        tag = await queue.consume(on_message, no_ack=True)
        self._tags.append((queue, tag))

    async def _on_done(self, message: AbstractIncomingMessage) -> None:
        at = time.perf_counter()
        key, body = self._read(message.body)
        if key is None:
            return
        async with self._changed:
            if key in self.arrived or key in self.failed:
                self.duplicates += 1
            else:
                self.arrived[key] = Arrival(at=at, t0=float(body["t0"]))
            self._changed.notify_all()

    async def _on_failed(self, message: AbstractIncomingMessage) -> None:
        key, body = self._read(message.body)
        if key is None:
            return
        async with self._changed:
            if key in self.arrived or key in self.failed:
                self.duplicates += 1
            else:
                self.failed[key] = body
            self._changed.notify_all()

    def _read(self, raw: bytes) -> tuple[tuple[str, int] | None, Payload]:
        try:
            body = self._wire.unwrap(raw)
            return (str(body["phase"]), int(body["seq"])), body
        except (ValueError, KeyError, TypeError, IndexError):
            self.unreadable += 1
            return None, {}

    def count(self, phase: str) -> int:
        """Messages of `phase` that arrived, through every hop or failed."""
        return sum(1 for key in (*self.arrived, *self.failed) if key[0] == phase)

    async def wait_for(self, phase: str, count: int, timeout_s: float) -> None:
        """Until `count` messages of `phase` arrived.

        Raises:
            TimeoutError: fewer arrived within `timeout_s`.
        """
        async with asyncio.timeout(timeout_s), self._changed:
            await self._changed.wait_for(lambda: self.count(phase) >= count)

    def of(self, phase: str) -> list[Arrival]:
        return [a for key, a in self.arrived.items() if key[0] == phase]

    def missing(self, phase: str, sent: int) -> list[int]:
        seen = {key[1] for key in (*self.arrived, *self.failed) if key[0] == phase}
        return [seq for seq in range(sent) if seq not in seen]

    async def close(self) -> None:
        for queue, tag in self._tags:
            await queue.cancel(tag)
        await self._channel.close()


def json_payload(body: bytes) -> Payload:
    """The payload of a plain JSON message (raw aio-pika's)."""
    value = json.loads(body)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value
