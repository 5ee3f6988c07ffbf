"""An actor's queues on the broker: declared when it is applied, deleted when it is deleted.

I/O over AMQP with asya's own transport (one short connection per call): the names, the
arguments (quorum, delivery limit, dead-lettering) and the topology are the transport's, so
what the operator declares is exactly what the actor's sidecar declares again when it starts.
Declaring is idempotent, and comes before the first envelope: with `minReplicas: 0` no sidecar
runs until KEDA sees a queue depth, so without it a client's first publish would find no queue.

Deletion is narrow: the actor's queue and its retry delay queues, never the namespace's
parking queue, end actors' queues or end records (other actors' results live there).
"""

from __future__ import annotations

from typing import Final

from asya.routing import END_ACTORS
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport

CONNECTION_NAME: Final = "asya-operator"


def _transport(amqp_url: str, namespace: str) -> RabbitMQTransport:
    options = RabbitMQOptions(namespace=namespace, connection_name=CONNECTION_NAME)
    return RabbitMQTransport(amqp_url, options)


async def declare_actor_queues(amqp_url: str, namespace: str, actor: str) -> None:
    """Declare `actor`'s queue and the namespace's end actors' queues (idempotent).

    Raises:
        TransportError: the broker is unreachable, refused the credentials or the declare.
    """
    async with _transport(amqp_url, namespace) as transport:
        for name in (actor, *sorted(END_ACTORS)):
            await transport.declare(name)


async def delete_actor_queues(amqp_url: str, namespace: str, actor: str) -> None:
    """Delete `actor`'s queues with what they hold (a missing queue is no error).

    Raises:
        TransportError: the broker is unreachable or refused the credentials.
    """
    async with _transport(amqp_url, namespace) as transport:
        channel = await transport.open_channel()
        for name in transport.queues_of(actor):
            await channel.queue_delete(name)
        await channel.close()
