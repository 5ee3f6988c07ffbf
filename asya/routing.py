"""Routing rules: the one place that decides where an envelope goes next.

Pure functions from (envelope, what happened, now) to deliveries — (target actor, envelope,
delay). No I/O, no clock: the consumer (local runner or sidecar) reads the world, calls these,
and carries out the deliveries. The rules (DESIGN.md §3):

- On success `curr` moves to the end of `prev` and the first of the handler's `next` becomes
  `curr`; with nothing next, the envelope goes to `happy-end`. No outputs at all (the handler
  returned None) ends the pipeline successfully, carrying the payload the actor received.
- A generator's outputs are fan-out children `<id>-<i>` (i from 1) with `parent_id` set, each
  carrying its parent's `lineage` plus its own `Branch(index=i, of=n)`; everything else keeps
  the lineage it arrived with (retries, failures, route rewrites), so a client can tell when a
  call's whole tree has ended (`asya.lineage`).
- Failures go back to the same actor after a delay while the retry policy allows, then to
  `error-end` with the route left where it failed, so the record shows where and what was left.
- Before user code runs: a deadline that has passed, or a hop count at the limit, sends the
  envelope to `error-end` without calling it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import msgspec

from asya.envelope import (
    ACTOR_NAME_MAX_LENGTH,
    Branch,
    Envelope,
    ErrorInfo,
    Limits,
    Phase,
    Reason,
    Route,
    Status,
    actor_name_problem,
    raw_body_record,
)
from asya.outcome import Emitted, Failure, Success

HAPPY_END: Final = "happy-end"
ERROR_END: Final = "error-end"
END_ACTORS: Final = frozenset({HAPPY_END, ERROR_END})

ERROR_MESSAGE_MAX_CHARS: Final = 4_000
"""Longest error message a record keeps (a handler may raise with megabytes of text)."""
TRACEBACK_MAX_CHARS: Final = 16_000
"""Longest traceback a record keeps; the end, where the error was raised, is what is kept."""
RETRY_HISTORY_MAX: Final = 16
"""Earlier failed attempts an envelope carries on after a success (newest kept)."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """An envelope to publish to `target`'s queue, `delay_ms` from now."""

    target: str
    envelope: Envelope
    delay_ms: int = 0


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why an envelope must not reach user code."""

    reason: Reason
    message: str


def is_end_actor(name: str) -> bool:
    """Whether `name` is one of the built-in end actors."""
    return name in END_ACTORS


def route_name_problem(name: str) -> str | None:
    """Why `name` cannot appear in `route.next`, or None when it can."""
    if is_end_actor(name):
        return (
            f"'{name}' is an end actor and cannot be routed to: return None to end"
            " successfully, raise to fail"
        )
    problem = actor_name_problem(name)
    if problem is None:
        return None
    kebab = kebab_case(name)
    if kebab != name and actor_name_problem(kebab) is None and not is_end_actor(kebab):
        # `human_review` is the Python name; `@actor` names the actor `human-review`.
        return f"{problem}; did you mean '{kebab}' (actor names are kebab-case)?"
    return problem


def kebab_case(name: str) -> str:
    """An actor's default name from its Python name: `clean_text` -> `clean-text`,
    `SentimentScorer` -> `sentiment-scorer` (the name `@actor` gives when none is set)."""
    kebab = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name).replace("_", "-").lower()
    return kebab.strip("-")[:ACTOR_NAME_MAX_LENGTH]


def closest_actor(name: str, actors: Iterable[str]) -> str | None:
    """The actor of `actors` that `name` most likely means, or None when none is close.

    The kebab-case form first (`human_review`, the Python name, means `human-review`), then
    the closest spelling (`clen` means `clean`), as `difflib` ranks them.
    """
    known = sorted(set(actors))
    kebab = kebab_case(name)
    if kebab in known:
        return kebab
    close = difflib.get_close_matches(name, known, n=1)
    return close[0] if close else None


def check_arrival(
    envelope: Envelope, actor: str, now: datetime, limits: Limits
) -> Rejection | None:
    """Whether `envelope`, delivered to `actor`, must go to `error-end` before user code runs."""
    if envelope.route.curr != actor:
        return Rejection(
            Reason.MALFORMED_ENVELOPE,
            f"route.curr is '{envelope.route.curr}' but the envelope was delivered to '{actor}'",
        )
    deadline = envelope.status.deadline_at
    if deadline is not None and deadline <= now:
        return Rejection(
            Reason.DEADLINE_EXCEEDED,
            f"deadline {deadline.isoformat()} passed before '{actor}' could run",
        )
    hops = len(envelope.route.prev)
    if hops >= limits.hop_limit:
        return Rejection(
            Reason.HOP_LIMIT_EXCEEDED,
            f"envelope has passed {hops} actors, the hop limit is {limits.hop_limit};"
            " a route that keeps rewriting itself may be looping",
        )
    return None


def plan_success(envelope: Envelope, success: Success, now: datetime) -> list[Delivery]:
    """Where each output of a successful call goes."""
    if not success.outputs:
        # A generator that yields nothing ends its branch here: a leaf of the call's tree.
        ended = Emitted(payload=envelope.payload, next=(), headers=envelope.headers)
        return [_advance(envelope, ended, _Identity.of(envelope), now)]
    if not success.fan_out:
        return [_advance(envelope, out, _Identity.of(envelope), now) for out in success.outputs]
    siblings = len(success.outputs)
    return [
        _advance(
            envelope,
            out,
            _Identity(
                id=f"{envelope.id}-{index}",
                parent_id=envelope.id,
                lineage=(*envelope.lineage, Branch(index=index, of=siblings)),
            ),
            now,
        )
        for index, out in enumerate(success.outputs, start=1)
    ]


def plan_failure(
    envelope: Envelope,
    failure: Failure,
    *,
    delay_ms: int | None,
    max_attempts: int,
    now: datetime,
) -> Delivery:
    """A retry after `delay_ms`, or `error-end` when `delay_ms` is None."""
    status = envelope.status
    error = _error_info(
        failure.type, failure.message, envelope.route.curr, status.attempt, failure.traceback
    )
    if delay_ms is not None:
        retried = msgspec.structs.replace(
            status,
            phase=Phase.RETRYING,
            actor=envelope.route.curr,
            attempt=status.attempt + 1,
            max_attempts=max_attempts,
            updated_at=now,
            retries=(*status.retries, error),
        )
        return Delivery(
            envelope.route.curr, msgspec.structs.replace(envelope, status=retried), delay_ms
        )
    failed = msgspec.structs.replace(
        status,
        phase=Phase.FAILED,
        actor=envelope.route.curr,
        max_attempts=max_attempts,
        updated_at=now,
        reason=failure.reason,
        error=error,
    )
    return Delivery(ERROR_END, msgspec.structs.replace(envelope, status=failed))


def plan_rejection(envelope: Envelope, rejection: Rejection, now: datetime) -> Delivery:
    """Send `envelope` to `error-end` for a reason found outside user code."""
    error = _error_info(
        rejection.reason.value, rejection.message, envelope.route.curr, envelope.status.attempt
    )
    failed = msgspec.structs.replace(
        envelope.status,
        phase=Phase.FAILED,
        actor=envelope.route.curr,
        updated_at=now,
        reason=rejection.reason,
        error=error,
    )
    return Delivery(ERROR_END, msgspec.structs.replace(envelope, status=failed))


def plan_malformed(
    body: bytes, rejection: Rejection, *, actor: str, envelope_id: str, now: datetime
) -> Delivery:
    """Wrap bytes that are not an envelope into one for `error-end`, keeping the raw body.

    The record keeps the body's start, size and sha256 (`raw_body_record`), so it stays small
    whatever arrived.
    """
    wrapped = Envelope(
        id=envelope_id,
        route=Route(curr=actor),
        payload=raw_body_record(body),
        status=Status(created_at=now),
    )
    return plan_rejection(wrapped, rejection, now)


def _error_info(
    kind: str, message: str, actor: str, attempt: int, traceback: str | None = None
) -> ErrorInfo:
    if len(message) > ERROR_MESSAGE_MAX_CHARS:
        cut = len(message) - ERROR_MESSAGE_MAX_CHARS
        message = f"{message[:ERROR_MESSAGE_MAX_CHARS]}... [{cut} more characters]"
    if traceback is not None and len(traceback) > TRACEBACK_MAX_CHARS:
        cut = len(traceback) - TRACEBACK_MAX_CHARS
        traceback = f"[{cut} characters cut]...{traceback[-TRACEBACK_MAX_CHARS:]}"
    return ErrorInfo(
        type=kind[:200], message=message, actor=actor, attempt=attempt, traceback=traceback
    )


def _history(retries: tuple[ErrorInfo, ...]) -> tuple[ErrorInfo, ...]:
    # What an envelope carries on: every attempt's error without its traceback (the record of
    # the attempt that finally failed keeps its own), and only the newest, so it stays small.
    return tuple(
        msgspec.structs.replace(error, traceback=None) if error.traceback else error
        for error in retries[-RETRY_HISTORY_MAX:]
    )


@dataclass(frozen=True, slots=True)
class _Identity:
    """Who an output is: the input itself, or one of its fan-out children."""

    id: str
    parent_id: str | None
    lineage: tuple[Branch, ...]

    @classmethod
    def of(cls, envelope: Envelope) -> _Identity:
        return cls(id=envelope.id, parent_id=envelope.parent_id, lineage=envelope.lineage)


def _advance(envelope: Envelope, out: Emitted, who: _Identity, now: datetime) -> Delivery:
    problem = next((p for p in map(route_name_problem, out.next) if p is not None), None)
    if problem is not None:
        # Keep the route where it was: a bad name must not become `curr` of a stored envelope.
        bad = msgspec.structs.replace(
            envelope,
            id=who.id,
            parent_id=who.parent_id,
            lineage=who.lineage,
            payload=out.payload,
            headers=out.headers,
        )
        return plan_rejection(bad, Rejection(Reason.UNKNOWN_ACTOR, problem), now)
    status = Status(
        phase=Phase.PENDING,
        created_at=envelope.status.created_at,
        updated_at=now,
        deadline_at=envelope.status.deadline_at,
        retries=_history(envelope.status.retries),
    )
    prev = (*envelope.route.prev, envelope.route.curr)
    if out.next:
        route = Route(prev=prev, curr=out.next[0], next=out.next[1:])
    else:
        route = Route(prev=prev, curr=HAPPY_END)
        status = msgspec.structs.replace(status, phase=Phase.SUCCEEDED)
    child = Envelope(
        id=who.id,
        parent_id=who.parent_id,
        lineage=who.lineage,
        route=route,
        headers=out.headers,
        status=status,
        payload=out.payload,
    )
    return Delivery(route.curr, child)


def plan_unknown_actor(delivery: Delivery, message: str, now: datetime) -> Delivery:
    """A delivery whose target has no queue goes to `error-end` instead of being dropped."""
    return plan_rejection(delivery.envelope, Rejection(Reason.UNKNOWN_ACTOR, message), now)
