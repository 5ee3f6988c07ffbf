"""An actor's queues on the broker: declared when it is applied, deleted when it is deleted.

I/O over AMQP with asya's own transport (one short connection per call): the names, the
arguments (quorum, delivery limit, dead-lettering) and the topology are the transport's, so
what the operator declares is exactly what the actor's sidecar declares again when it starts.
At most `BROKER_CALLS` such connections are open at once (a cold start reconciles every actor
together: a thousand connections at once is a broker's file descriptors gone), and each call
is bounded by `BROKER_CALL_S` (a broker that accepts the connection and never completes its
handshake held a reconcile for ever; it is now a `TransportError`, reported and rechecked).
Declaring is idempotent, and comes before the first envelope: with `minReplicas: 0` no sidecar
runs until KEDA sees a queue depth, so without it a client's first publish would find no queue.

Deletion is narrow: the actor's queue and its retry delay queues, never the namespace's
parking queue, end actors' queues or end records (other actors' results live there), nor the
queue of an actor name another object of the namespace runs as too (`plans.names`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Collection, Sequence
from typing import Final

import kopf

from asya.errors import TransportError
from asya.routing import END_ACTORS
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
from asya_operator import metrics

CONNECTION_NAME: Final = "asya-operator"

BROKER_CALLS: Final = 8
"""Connections to brokers the operator holds open at once; more calls wait their turn."""

BROKER_CALL_S: Final = 30.0
"""The longest one call (connect, declare or delete, close) may take once it has its turn."""

_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)


@contextlib.asynccontextmanager
async def _broker_call(timeout_s: float) -> AsyncIterator[None]:
    """One call's turn among `BROKER_CALLS`, bounded by `timeout_s` once it has it."""
    loop = asyncio.get_running_loop()
    turns = _turns.setdefault(loop, asyncio.Semaphore(BROKER_CALLS))
    async with turns:
        try:
            async with asyncio.timeout(timeout_s):
                yield
        except TimeoutError as exc:
            raise TransportError(f"the broker did not answer within {timeout_s} s") from exc


DELETE_ATTEMPTS: Final = 5
"""Tries at deleting a deleted actor's (or group's) queues while the broker is unreachable,
`recheck_s` apart; then it is let go and its queues are left (logged)."""


def _transport(amqp_url: str, namespace: str) -> RabbitMQTransport:
    options = RabbitMQOptions(namespace=namespace, connection_name=CONNECTION_NAME)
    return RabbitMQTransport(amqp_url, options)


async def declare_actor_queues(
    amqp_url: str, namespace: str, actor: str, *, timeout_s: float = BROKER_CALL_S
) -> None:
    """Declare `actor`'s queue and the namespace's end actors' queues (idempotent).

    Raises:
        TransportError: the broker is unreachable, refused the credentials or the declare, or
            did not answer within `timeout_s`.
    """
    async with _broker_call(timeout_s), _transport(amqp_url, namespace) as transport:
        for name in (actor, *sorted(END_ACTORS)):
            await transport.declare(name)


async def delete_actor_queues(
    amqp_url: str, namespace: str, actor: str, *, timeout_s: float = BROKER_CALL_S
) -> None:
    """Delete `actor`'s queues with what they hold (a missing queue is no error).

    Raises:
        TransportError: the broker is unreachable or refused the credentials, or did not
            answer within `timeout_s`.
    """
    async with _broker_call(timeout_s), _transport(amqp_url, namespace) as transport:
        channel = await transport.open_channel()
        for name in transport.queues_of(actor):
            await channel.queue_delete(name)
        await channel.close()


async def release_queues(
    url: str | None,
    namespace: str,
    actors: Sequence[str],
    *,
    shared: Collection[str],
    keep: bool,
    attempt: int,
    recheck_s: float,
    logger: kopf.Logger | logging.Logger,
) -> None:
    """Delete the queues of `actors` (one deleted AsyncActor, or a deleted group's members)
    unless `keep`; never block the deletion for ever. Those of `actors` another object of the
    namespace runs as too (`shared`: `names.shared_names`) are left: their queues are its.
    `url` is the broker's (None: its Secret or key is gone, so the queues are left, with a
    warning); `attempt` counts from 0.

    Raises:
        kopf.TemporaryError: the broker is unreachable (at most `DELETE_ATTEMPTS` times).
    """
    if keep:
        logger.info("queues kept (keepQueues)")
        metrics.QUEUE_DELETIONS.labels(outcome="kept").inc()
        return
    if shared:
        logger.info("queues left to the objects that run as them too", extra={"actors": shared})
    actors = [actor for actor in actors if actor not in shared]
    if not actors:
        return
    if url is None:
        logger.warning("queues left on the broker: the broker Secret or its amqp-url is gone")
        metrics.QUEUE_DELETIONS.labels(outcome="left").inc()
        return
    try:
        for actor in actors:
            await delete_actor_queues(url, namespace, actor)
    except TransportError as exc:
        if attempt + 1 >= DELETE_ATTEMPTS:
            logger.error(
                "queues left on the broker", extra={"tries": DELETE_ATTEMPTS, "error": str(exc)}
            )
            metrics.QUEUE_DELETIONS.labels(outcome="left").inc()
            return
        raise kopf.TemporaryError(
            f"queues not deleted: {exc}; trying again in {recheck_s} s", delay=recheck_s
        ) from exc
    metrics.QUEUE_DELETIONS.labels(outcome="deleted").inc()
