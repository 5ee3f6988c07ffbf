"""Input lines (JSON Lines) into envelopes, or into `error-end` deliveries when they are bad.

A line is either a bare payload, sent along the given route, or a whole envelope (an object with
a `route`), which keeps its own route; `route` may be the full triplet or a list of actor names,
and `id` and `status` may be left out. A line that is not JSON, or not a valid envelope, is not
an error of the run: it becomes an `error-end` envelope with its reason and raw bytes, like any
malformed message (bytes that are not UTF-8 included). Before a run, `first_bare_payload` and
`check_route` let the caller fail fast on a route that cannot work. Pure: `now` and the random
source are arguments.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, TypeGuard

import msgspec

from asya.envelope import (
    Envelope,
    Limits,
    Reason,
    Route,
    Status,
    actor_name_problem,
    decode_envelope,
    encode_payload,
    new_envelope_id,
)
from asya.errors import EnvelopeError, PayloadTooLargeError, SettingsError
from asya.routing import Delivery, Rejection, closest_actor, plan_malformed, route_name_problem

ENTRY_UNKNOWN = "input"
"""The actor recorded for a bad line when no route says where it was going."""


def parse_line(
    line: bytes,
    *,
    line_no: int,
    route: Sequence[str] | None,
    limits: Limits,
    now: datetime,
    rng: random.Random,
) -> Envelope | Delivery:
    """An envelope to publish to `route.curr`, or a delivery to `error-end` for a bad line."""
    raw = line
    entry = route[0] if route else ENTRY_UNKNOWN

    def bad(reason: Reason, message: str) -> Delivery:
        rejection = Rejection(reason, f"input line {line_no}: {message}")
        envelope_id = new_envelope_id(now, rng)
        return plan_malformed(raw, rejection, actor=entry, envelope_id=envelope_id, now=now)

    try:
        value = msgspec.json.decode(raw)
    except UnicodeDecodeError as exc:
        return bad(Reason.MALFORMED_ENVELOPE, f"not UTF-8: {exc}")
    except msgspec.DecodeError as exc:
        # msgspec 0.23 reports bad UTF-8 as a DecodeError; say which it is either way.
        not_utf8 = _not_utf8(raw)
        if not_utf8 is not None:
            return bad(Reason.MALFORMED_ENVELOPE, f"not UTF-8: {not_utf8}")
        return bad(Reason.MALFORMED_ENVELOPE, f"not valid JSON: {exc}")
    if is_whole_envelope(value):
        return _whole_envelope(value, limits, now, rng, bad)
    if not route:
        return bad(
            Reason.MALFORMED_ENVELOPE,
            "a bare payload needs a route: pass --route a,b,c or declare ROUTE in the app",
        )
    try:
        encode_payload(value, limits)
    except PayloadTooLargeError as exc:
        return bad(Reason.PAYLOAD_TOO_LARGE, str(exc))
    return Envelope(
        id=new_envelope_id(now, rng),
        route=Route(curr=route[0], next=tuple(route[1:])),
        status=Status(created_at=now, updated_at=now),
        payload=value,
    )


def first_bare_payload(lines: Iterable[bytes]) -> int | None:
    """The number (from 1) of the first line that is a bare payload, which needs a route.

    Blank lines, whole envelopes (they carry their own route) and bad lines (they end in
    `error-end` whatever the route) need none.
    """
    for line_no, value in json_lines(lines):
        if not is_whole_envelope(value):
            return line_no
    return None


def json_lines(lines: Iterable[bytes]) -> Iterator[tuple[int, object]]:
    """Each line that holds JSON, decoded, with its number (from 1); blank and bad lines are
    left out (a bad line ends in `error-end` whatever the route)."""
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield line_no, msgspec.json.decode(line)
        except (msgspec.DecodeError, UnicodeDecodeError):
            continue


def check_route(route: Sequence[str], actors: Iterable[str], *, option: str) -> None:
    """Fail unless every name in `route` is one of `actors`.

    Raises:
        SettingsError: a name is not an actor; the message names the closest one.
    """
    known = sorted(actors)
    for name in route:
        if name in known:
            continue
        close = closest_actor(name, known)
        hint = f"did you mean '{close}'?" if close else f"the actors are: {', '.join(known)}"
        raise SettingsError(
            f"{option} names '{name}', which the app does not define; {hint}",
            variable=option,
            value=",".join(route),
        )


def is_whole_envelope(value: object) -> TypeGuard[dict[str, Any]]:
    """Whether an input line's value is a whole envelope (it carries its own route) rather than
    a bare payload."""
    return isinstance(value, dict) and "route" in value


def _whole_envelope(
    value: dict[str, Any],
    limits: Limits,
    now: datetime,
    rng: random.Random,
    bad: Callable[[Reason, str], Delivery],
) -> Envelope | Delivery:
    draft = dict(value)
    if isinstance(draft["route"], list):
        names = draft["route"]
        draft["route"] = {"curr": names[0], "next": names[1:]} if names else {}
    problem = _route_problem(draft["route"])
    if problem is not None:
        return bad(Reason.MALFORMED_ENVELOPE, problem)
    draft.setdefault("id", new_envelope_id(now, rng))
    status = draft.setdefault("status", {})
    if isinstance(status, dict):
        status.setdefault("created_at", now.isoformat())
        status.setdefault("updated_at", now.isoformat())
    try:
        envelope = decode_envelope(msgspec.json.encode(draft), limits)
        encode_payload(envelope.payload, limits)
    except PayloadTooLargeError as exc:
        return bad(Reason.PAYLOAD_TOO_LARGE, str(exc))
    except EnvelopeError as exc:
        return bad(Reason.MALFORMED_ENVELOPE, str(exc))
    return envelope


def _route_problem(route: object) -> str | None:
    """Why a line's route names something that cannot be an actor, in words with the fix
    (`human_review` -> `human-review`); the envelope decoder's pattern error says neither."""
    if not isinstance(route, dict):
        return None
    curr, rest = route.get("curr"), route.get("next")
    names = [curr, *rest] if isinstance(rest, list) else [curr]
    for name in names:
        # Only names no actor can have: an end actor as `curr` (a final fed back in) is kept.
        if isinstance(name, str) and actor_name_problem(name) is not None:
            return f"route: {route_name_problem(name)}"
    return None


def _not_utf8(raw: bytes) -> UnicodeDecodeError | None:
    """Why `raw` is not UTF-8, or None where it is (looked at only for a line that failed)."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc
    return None
