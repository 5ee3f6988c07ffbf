"""What a handler may see and change while it runs.

A handler that declares a `Context` parameter gets one per call: the envelope's ids, the actor,
the attempt, the headers (writable) and the route, of which only `next` is writable — `prev` and
`curr` are history. Built from an envelope by `asya.handler`, read back by it after the call.
Holds no references to queues, brokers or the envelope itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from asya.envelope import Envelope


@dataclass(slots=True)
class RouteView:
    """The route as a handler sees it: rewrite `next` to change what comes after this actor."""

    prev: tuple[str, ...]
    curr: str
    next: list[str]


@dataclass(slots=True)
class Context:
    """Per-call view of the envelope for user code."""

    id: str
    parent_id: str | None
    actor: str
    attempt: int
    max_attempts: int | None
    deadline_at: datetime | None
    route: RouteView
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_envelope(cls, envelope: Envelope, max_attempts: int | None = None) -> Context:
        """A fresh, independent context for one call on `envelope`."""
        return cls(
            id=envelope.id,
            parent_id=envelope.parent_id,
            actor=envelope.route.curr,
            attempt=envelope.status.attempt,
            max_attempts=max_attempts,
            deadline_at=envelope.status.deadline_at,
            route=RouteView(
                prev=envelope.route.prev,
                curr=envelope.route.curr,
                next=list(envelope.route.next),
            ),
            headers=dict(envelope.headers),
        )
