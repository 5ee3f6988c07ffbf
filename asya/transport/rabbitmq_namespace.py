"""A namespace's queues on RabbitMQ as a whole: which exist, who holds them, deleting them.

For `asya clean`, after `asya serve` (or any run on a namespace that is not fresh). Names,
never prefixes: the queues considered are exactly those the transport names for the given
actors (their queues and retry delay queues, the end actors' too), the parking queue and the
end records' streams. A prefix would not do: `asya-ml-a-x` is namespace `ml`'s actor `a-x` as
much as namespace `ml-a`'s actor `x`. Such a name, when the other namespace is on the broker
(its parking queue exists, declared with its end actors), is reported as shared, not deleted.

Reading is by AMQP passive declare (messages and consumers, no management API). Deleting
checks again just before each queue goes; the broker cannot close the last gap for us, since
quorum queues refuse `if-unused` deletes (RabbitMQ closes the connection instead).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass

import aiormq
from aio_pika.abc import AbstractChannel

from asya.errors import TransportError
from asya.routing import END_ACTORS
from asya.transport.base import parking_queue_name
from asya.transport.rabbitmq import RabbitMQTransport
from asya.transport.records import RecordKind, records_stream_name


@dataclass(frozen=True, slots=True)
class QueueState:
    """A queue that exists: what it holds and how many consumers are attached to it."""

    name: str
    messages: int
    consumers: int


@dataclass(frozen=True, slots=True)
class SharedName:
    """A queue name that is also a name of another namespace, `namespace`."""

    queue: str
    namespace: str


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


def other_namespaces(namespace: str, queue: str) -> list[str]:
    """The other namespaces whose names `queue` (a name of `namespace`) may also be:
    `asya-ml-a-x` may be namespace `ml-a`'s (actor `x`) or `ml-a-x`'s (a delay queue's
    prefix). Names with a `.` (parking, records, replies) are the namespace's alone:
    neither namespaces nor actors hold a `.`."""
    prefix = f"asya-{namespace}-"
    if not queue.startswith(prefix):
        return []
    rest = queue[len(prefix) :]
    return [
        f"{namespace}-{rest[:at]}"
        for at, char in enumerate(rest)
        if char == "-" and 0 < at < len(rest) - 1
    ]


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

    async def shared(self, namespace: str, names: Iterable[str]) -> list[SharedName]:
        """Which of `names` are also a queue name of another namespace on the broker.

        Raises:
            TransportError: the broker cannot be read.
        """
        shared = []
        for name in names:
            for other in other_namespaces(namespace, name):
                # Every namespace that ran has a parking queue: declared with its end actors.
                if await self.state(parking_queue_name(other)) is not None:
                    shared.append(SharedName(queue=name, namespace=other))
                    break
        return shared

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

    async def aclose(self) -> None:
        if self._channel is not None and not self._channel.is_closed:
            with contextlib.suppress(aiormq.exceptions.AMQPError, ConnectionError):
                await self._channel.close()
        self._channel = None
