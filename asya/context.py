"""What a handler may see and change while it runs.

A handler that declares a `Context` parameter gets one per call (a batch handler, one per
payload): the envelope's ids, the actor, the attempt, the headers (writable) and the route, of
which only `next` is writable — `prev` and `curr` are history, and writing any other field
raises rather than being silently lost. Built from an envelope by `asya.handler`, read back by
it after the call, per output; tests build one with
`asya.testing.make_context`. Holds no references to queues, brokers or the envelope itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asya.envelope import Envelope


@dataclass(slots=True)
class RouteView:
    """The route as a handler sees it: rewrite `next` to change what comes after this actor.

    `prev` and `curr` are history and read-only: a write would otherwise be silently lost, as
    only `next` is read back after the call.
    """

    prev: tuple[str, ...]
    curr: str
    next: list[str]

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "next":
            if isinstance(value, str):
                raise TypeError(
                    f"route.next takes a list of actor names, got the string {value!r};"
                    f" write route.next = [{value!r}]"
                )
            value = list(value)
        elif _is_set(self, name):
            raise AttributeError(
                f"route.{name} is read-only (the route so far); only route.next is writable"
            )
        object.__setattr__(self, name, value)


@dataclass(slots=True)
class Context:
    """Per-call view of the envelope for user code; only `headers` and `route.next` are writable.

    To build one in a test, use `asya.testing.make_context`.
    """

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

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "headers" and _is_set(self, name):
            raise AttributeError(
                f"ctx.{name} is read-only; only ctx.headers and ctx.route.next are writable"
            )
        object.__setattr__(self, name, value)


def _is_set(obj: object, name: str) -> bool:
    # A slot is unset until __init__ assigns it: that first write is the only one allowed.
    return hasattr(obj, name)
