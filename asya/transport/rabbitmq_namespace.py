"""A namespace's queues on RabbitMQ as a whole: which exist, who holds them, deleting them.

For `asya clean`, after `asya serve` (or any run on a namespace that is not fresh), and for
`asya migrate-queues`. Names, never prefixes: the queues considered are exactly those the
transport names for the given actors (their queues and retry delay queues, the end actors'
too), the parking queue and the end records' streams; no two namespaces have a name in common
(`asya.queue_names`).

Reading is by AMQP passive declare (messages and consumers, no management API). Deleting
checks again just before each queue goes; the broker cannot close the last gap for us, since
quorum queues refuse `if-unused` deletes (RabbitMQ closes the connection instead).
`delete_if_empty` lets the broker close it where it can (classic queues): it tries on a
connection of its own, which a quorum queue's refusal closes instead of the transport's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass

import aiormq
from aio_pika.abc import AbstractChannel
from aiormq import spec

from asya.errors import TransportError
from asya.routing import END_ACTORS
from asya.transport.rabbitmq import RabbitMQTransport
from asya.transport.records import RecordKind, records_stream_name


@dataclass(frozen=True, slots=True)
class QueueState:
    """A queue that exists: what it holds and how many consumers are attached to it."""

    name: str
    messages: int
    consumers: int


def namespace_queue_names(transport: RabbitMQTransport, actors: Iterable[str]) -> list[str]:
    """Every queue the transport's namespace may have for `actors` and its end actors, as the
    transport names them: actor queues with their retry delay queues, the parking queue, the
    records' streams. Reply queues are not among them: exclusive to their client, they go when
    it disconnects."""
    namespace = transport.options.namespace
    names = [transport.parking_queue]
    names += [records_stream_name(namespace, kind) for kind in RecordKind]
    for actor in sorted({*actors, *END_ACTORS}):
        names += transport.queues_of(actor)
    return names


class NamespaceQueues:
    """Reads and deletes queues by name on one broker connection (`transport`, connected)."""

    def __init__(self, transport: RabbitMQTransport) -> None:
        self._transport = transport
        self._channel: AbstractChannel | None = None

    async def state(self, name: str) -> QueueState | None:
        """What `name` holds and who consumes it; None when there is no such queue.

        Raises:
            TransportError: the broker cannot be read.
        """
        # A passive declare of a missing queue closes its channel: a channel of our own.
        if self._channel is None or self._channel.is_closed:
            self._channel = await self._transport.open_channel()
        try:
            underlay = await self._channel.get_underlay_channel()
            declared = await underlay.queue_declare(name, passive=True)
        except aiormq.exceptions.ChannelNotFoundEntity:
            return None
        except (aiormq.exceptions.AMQPError, ConnectionError) as exc:
            raise TransportError(f"cannot read queue {name}: {exc}") from exc
        return QueueState(
            name=name,
            messages=declared.message_count or 0,
            consumers=declared.consumer_count or 0,
        )

    async def states(self, names: Iterable[str]) -> list[QueueState]:
        """The queues of `names` that exist, in the order given.

        Raises:
            TransportError: the broker cannot be read.
        """
        found = []
        for name in names:
            state = await self.state(name)
            if state is not None:
                found.append(state)
        return found

    async def move(self, source: str, actor: str) -> int:
        """Move every message of queue `source` into `actor`'s queue, one at a time: each is
        published (confirmed) before it is acked in `source`, so a crash between the two leaves
        it in both (delivered twice, as any redelivery), never in neither. The count moved.

        Raises:
            TransportError: the broker refused, or cannot be reached; what was not yet acked
                stays in `source`.
        """
        channel = await self._transport.open_channel()
        moved = 0
        try:
            underlay = await channel.get_underlay_channel()
            while True:
                got = await underlay.basic_get(source, no_ack=False)
                if not isinstance(got.delivery, spec.Basic.GetOk) or got.delivery_tag is None:
                    return moved
                await self._transport.publish(actor, got.body)
                await underlay.basic_ack(got.delivery_tag)
                moved += 1
        except (aiormq.exceptions.AMQPError, ConnectionError) as exc:
            raise TransportError(f"cannot move {source} to '{actor}': {exc}") from exc
        finally:
            with contextlib.suppress(aiormq.exceptions.AMQPError, ConnectionError):
                await channel.close()

    async def delete(self, name: str) -> None:
        """Delete `name` with what it holds (a queue already gone is no error).

        Raises:
            TransportError: the broker refused or cannot be reached.
        """
        if self._channel is None or self._channel.is_closed:
            self._channel = await self._transport.open_channel()
        try:
            underlay = await self._channel.get_underlay_channel()
            await underlay.queue_delete(name)
        except (aiormq.exceptions.AMQPError, ConnectionError) as exc:
            raise TransportError(f"cannot delete queue {name}: {exc}") from exc

    async def unbind(self, name: str, exchange: str, routing_key: str) -> None:
        """Unbind queue `name` from `exchange`'s `routing_key`: from then on what is published
        there is unroutable (returned to a sender that asked, as every asya publish does).

        Raises:
            TransportError: the broker refused or cannot be reached.
        """
        await self._binding(name, exchange, routing_key, bound=False)

    async def bind(self, name: str, exchange: str, routing_key: str) -> None:
        """Bind queue `name` to `exchange`'s `routing_key` (again: `unbind` undone).

        Raises:
            TransportError: the broker refused or cannot be reached.
        """
        await self._binding(name, exchange, routing_key, bound=True)

    async def _binding(self, name: str, exchange: str, routing_key: str, *, bound: bool) -> None:
        try:
            underlay = await self._underlay()
            if bound:
                await underlay.queue_bind(name, exchange, routing_key=routing_key)
            else:
                await underlay.queue_unbind(name, exchange, routing_key=routing_key)
        except (aiormq.exceptions.AMQPError, ConnectionError) as exc:
            verb = "bind queue {} to" if bound else "unbind queue {} from"
            raise TransportError(f"cannot {verb.format(name)} {exchange}: {exc}") from exc

    async def delete_if_empty(self, name: str) -> bool | None:
        """Delete `name` only if it holds no message and has no consumer, as the broker checks
        it in the delete itself, so nothing published meanwhile goes with it. True: deleted
        (or already gone); False: not empty or consumed now; None: the queue's type cannot be
        deleted so (quorum queues): check with `state`, then `delete`.

        Raises:
            TransportError: the broker cannot be reached.
        """
        try:
            connection = await aiormq.connect(self._transport.url)
        except (aiormq.exceptions.AMQPError, ConnectionError) as exc:
            raise TransportError(f"cannot delete queue {name}: {exc}") from exc
        try:
            channel = await connection.channel()
            await channel.queue_delete(name, if_unused=True, if_empty=True)
        except aiormq.exceptions.ChannelPreconditionFailed:
            return False
        except aiormq.exceptions.ConnectionNotImplemented:
            return None
        except (aiormq.exceptions.AMQPError, ConnectionError) as exc:
            raise TransportError(f"cannot delete queue {name}: {exc}") from exc
        finally:
            with contextlib.suppress(aiormq.exceptions.AMQPError, ConnectionError):
                await connection.close()
        return True

    async def _underlay(self) -> aiormq.abc.AbstractChannel:
        if self._channel is None or self._channel.is_closed:
            self._channel = await self._transport.open_channel()
        return await self._channel.get_underlay_channel()

    async def aclose(self) -> None:
        if self._channel is not None and not self._channel.is_closed:
            with contextlib.suppress(aiormq.exceptions.AMQPError, ConnectionError):
                await self._channel.close()
        self._channel = None
