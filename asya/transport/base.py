"""The Transport interface: the one seam between asya and a message broker.

A transport moves opaque bytes between named actor queues. It knows nothing of envelopes or
routing; consumers decide, transports carry out. Guarantees every implementation gives:
publishes are confirmed before `publish` returns, and a publish to an actor with no queue
raises `UnknownActorError` instead of dropping the message; a consumed message stays owned
(unacked) until `ack` or `requeue`, and a closed subscription gives back what it still owns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


def queue_name(namespace: str, actor: str) -> str:
    """The broker queue of `actor` in `namespace`: `asya-{namespace}-{actor}`."""
    return f"asya-{namespace}-{actor}"


@dataclass(frozen=True, slots=True)
class Message:
    """A consumed message; `tag` identifies it to the transport that delivered it."""

    actor: str
    body: bytes
    tag: int
    redelivered: bool = False


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """Messages waiting (`ready`) and delivered but not yet settled (`unacked`)."""

    ready: int
    unacked: int

    @property
    def total(self) -> int:
        """What a replica count is scaled by: busy actors are not scaled away."""
        return self.ready + self.unacked


class Subscription(Protocol):
    """Messages from one actor's queue, at most `prefetch` unsettled at a time."""

    async def get(self) -> Message | None:
        """The next message, or None once closed. Cancelling it takes nothing off the queue."""
        ...

    async def close(self) -> None:
        """Stop receiving and requeue every message still unsettled."""
        ...


class ReplyQueue(Protocol):
    """A private queue a client waits on for final envelopes (`reply_to`)."""

    @property
    def name(self) -> str: ...

    async def receive(self) -> bytes: ...

    async def close(self) -> None: ...


class Transport(Protocol):
    """Moves bytes between actor queues; see the module docstring for its guarantees."""

    async def declare(self, actor: str) -> None:
        """Make sure `actor`'s queue exists (idempotent)."""
        ...

    async def publish(self, actor: str, body: bytes, *, delay_ms: int = 0) -> None:
        """Put `body` on `actor`'s queue, `delay_ms` from now; returns once confirmed.

        Raises:
            UnknownActorError: `actor` has no queue.
            TransportError: the publish was not confirmed.
        """
        ...

    async def subscribe(self, actor: str, *, prefetch: int) -> Subscription:
        """Start consuming `actor`'s queue."""
        ...

    async def ack(self, message: Message) -> None:
        """Settle `message` as done: it is removed for good."""
        ...

    async def requeue(self, message: Message) -> None:
        """Give `message` back to its queue for redelivery."""
        ...

    async def depth(self, actor: str) -> QueueDepth:
        """How many messages `actor`'s queue holds."""
        ...

    async def open_reply_queue(self) -> ReplyQueue:
        """A new private queue for replies."""
        ...

    async def publish_reply(self, reply_to: str, body: bytes) -> None:
        """Send `body` to a reply queue; a reply queue that is gone is not an error."""
        ...

    async def aclose(self) -> None: ...
