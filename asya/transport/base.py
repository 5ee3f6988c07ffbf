"""The Transport interface: the one seam between asya and a message broker.

A transport moves opaque bytes between named actor queues. It knows nothing of envelopes or
routing; consumers decide, transports carry out. Guarantees every implementation gives:
publishes are confirmed before `publish` returns, and a publish to an actor with no queue
raises `UnknownActorError` instead of dropping the message; a consumed message stays owned
(unacked) by the subscription that delivered it until that subscription's `ack` or `requeue`,
and a closed subscription gives back what it still owns. Settling is the subscription's, not
the transport's: the one that received a message is the one that knows where to settle it.

An actor's queue is `asya.{namespace}.{actor}` (`asya.queue_names`). Besides the actors'
queues a namespace has two kinds of queue, named `asya-{namespace}.…`, a prefix no actor queue
has: the **parking** queue, where whatever an end actor cannot record is kept (never nowhere),
and **reply** queues, which
clients declare to wait for final envelopes. End actors answer `reply_to` only when it names a
reply queue of their namespace, so a sender cannot make them publish anywhere else. The
namespace's end records (results, failures, replays) are named the same way
(`asya.transport.records`) and kept by the transport's `records` store.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from asya.transport.records import RecordStore


def parking_queue_name(namespace: str) -> str:
    """The namespace's parking queue: `asya-{namespace}.parking` (no actor can have it)."""
    return f"asya-{namespace}.parking"


def reply_queue_name(namespace: str, token: str) -> str:
    """A client's reply queue: `asya-{namespace}.reply.{token}`, token 32 hex digits."""
    return f"asya-{namespace}.reply.{token}"


_REPLY_TOKEN = re.compile(r"[0-9a-f]{32}")


def is_reply_queue_name(namespace: str, name: str) -> bool:
    """Whether `name` is a reply queue of `namespace` (and so a `reply_to` end actors answer)."""
    prefix = reply_queue_name(namespace, "")
    return name.startswith(prefix) and _REPLY_TOKEN.fullmatch(name[len(prefix) :]) is not None


class DeathReason(enum.StrEnum):
    """Why the broker dead-lettered a message into the queue it was consumed from."""

    DELIVERY_LIMIT = "delivery_limit"
    """Redelivered past the queue's delivery limit (it kept crashing its consumer)."""
    EXPIRED = "expired"
    """Its time to live (per message or per queue) ran out before anyone consumed it."""
    MAXLEN = "maxlen"
    """The queue was over its length limit."""
    REJECTED = "rejected"
    """A consumer rejected it without requeueing."""


@dataclass(frozen=True, slots=True)
class Death:
    """The broker's last dead-lettering of a message: why, and from which queue."""

    reason: DeathReason
    queue: str


@dataclass(frozen=True, slots=True)
class Message:
    """A consumed message; `tag` identifies it to the subscription that delivered it."""

    actor: str
    body: bytes
    tag: int
    redelivered: bool = False
    death: Death | None = None
    """Set when the broker dead-lettered this very message into this queue."""


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
    """Messages from one actor's queue, at most `prefetch` unsettled at a time.

    What it delivers is settled through it, with `ack` or `requeue`. Settling a message it
    does not hold (settled already, given back by `close`, or delivered by another
    subscription) does nothing: a late settle never touches the message's redelivery, and the
    broker redelivers whatever it did not see settled.
    """

    async def get(self) -> Message | None:
        """The next message, or None once closed. Cancelling it takes nothing off the queue."""
        ...

    async def pause(self) -> None:
        """Stop receiving new messages; those already received stay owned (not requeued)."""
        ...

    async def resume(self) -> None:
        """Receive again after `pause`."""
        ...

    async def ack(self, message: Message) -> None:
        """Settle `message` as done: it is removed for good."""
        ...

    async def requeue(self, message: Message) -> None:
        """Give `message` back to its queue for redelivery."""
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

    @property
    def can_publish(self) -> bool:
        """Whether a publish can be attempted now (connected, publish channel open)."""
        ...

    @property
    def records(self) -> RecordStore:
        """The namespace's end records (results, failures, replays): `asya.transport.records`."""
        ...

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
        """Start consuming `actor`'s queue; what it delivers is settled through it."""
        ...

    async def depth(self, actor: str) -> QueueDepth:
        """How many messages `actor`'s queue holds."""
        ...

    async def park(self, body: bytes, *, reason: str) -> None:
        """Keep `body` on the namespace's parking queue, with `reason`; returns once confirmed.

        Raises:
            TransportError: the publish was not confirmed.
        """
        ...

    def is_reply_queue(self, name: str) -> bool:
        """Whether `name` is a reply queue of this transport's namespace."""
        ...

    async def open_reply_queue(self) -> ReplyQueue:
        """A new private queue for replies, named so that `is_reply_queue` accepts it."""
        ...

    async def publish_reply(self, reply_to: str, body: bytes) -> None:
        """Send `body` to a reply queue; a reply queue that is gone is not an error.

        Raises:
            ValueError: `reply_to` is not a reply queue of this namespace (see `is_reply_queue`).
        """
        ...

    async def aclose(self) -> None: ...
