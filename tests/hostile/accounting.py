"""Bookkeeping for hostile inputs: what was fed into a queue, and where each one ended.

An input is known by a key: its envelope id when its body is read as an envelope (the record
keeps the id), else the sha256 of its body (what a `MalformedEnvelope` or `PayloadTooLarge`
record of bytes that are not an envelope keeps, see `asya.envelope.raw_body_record`). `tally`
matches every final envelope the end actors recorded to exactly one input, and reports each
input that was lost, recorded twice or recorded with the wrong outcome, and every record that
matches no input.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from asya.envelope import Envelope, Phase, Reason
from asya.routing import ERROR_END, HAPPY_END

RAW_RECORD_KEYS = frozenset({"body_base64", "body_bytes", "body_sha256", "body_truncated"})


@dataclass(frozen=True)
class Expect:
    """Where an input must end: `happy-end`, or `error-end` with a reason."""

    end: str
    reason: Reason | None = None
    by: str | None = None
    """The actor that must have made the record (`status.error.actor`), when it matters."""

    def __str__(self) -> str:
        reason = "" if self.reason is None else f":{self.reason.value}"
        by = "" if self.by is None else f" by {self.by}"
        return f"{self.end}{reason}{by}"


HAPPY = Expect(HAPPY_END)


def failed(reason: Reason) -> Expect:
    return Expect(ERROR_END, reason)


MALFORMED = failed(Reason.MALFORMED_ENVELOPE)


@dataclass(frozen=True)
class Hostile:
    """One input: the bytes put on a queue, the AMQP properties they carry, where they must end."""

    label: str
    body: bytes
    expect: Expect
    envelope_id: str | None = None
    """Set when the body is read as an envelope: the record then keeps this id."""
    properties: dict[str, Any] = field(default_factory=dict)
    """aio-pika `Message` arguments; empty means asya's own publish."""
    or_refused_by: str | None = None
    """An actor that may also refuse this envelope at its door (a malformed record, by hash)."""

    @property
    def key(self) -> str:
        return self.envelope_id if self.envelope_id is not None else sha256(self.body)

    @property
    def keys(self) -> dict[str, Expect]:
        """Each key the input may be recorded under, with the outcome it must then have."""
        keys = {self.key: self.expect}
        if self.or_refused_by is not None:
            keys[sha256(self.body)] = Expect(
                ERROR_END, Reason.MALFORMED_ENVELOPE, self.or_refused_by
            )
        return keys


def sha256(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


_serial = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}-{next(_serial)}-{uuid.uuid4().hex[:8]}"


def envelope_fields(
    envelope_id: str, curr: str, payload: Any = None, *, next: Any = None, **fields: Any
) -> dict:
    """An envelope as a plain JSON object, to be mutated before it is encoded."""
    route = {"curr": curr} if next is None else {"curr": curr, "next": next}
    return {"id": envelope_id, "route": route, "payload": payload, **fields}


def json_body(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, allow_nan=False).encode()


def valid(
    label: str,
    curr: str,
    payload: Any = None,
    expect: Expect = HAPPY,
    *,
    next: Any = None,
    **fields,
) -> Hostile:
    """An input that is an envelope (it keeps its id); `fields` are added at the top level."""
    envelope_id = fields.pop("id", None) or new_id(label)
    body = json_body(envelope_fields(envelope_id, curr, payload, next=next, **fields))
    return Hostile(label, body, expect, envelope_id)


def raw(label: str, body: bytes, expect: Expect = MALFORMED) -> Hostile:
    """An input that is not an envelope: its record is known by the body's sha256."""
    return Hostile(label, body, expect)


def record_key(envelope: Envelope) -> str:
    payload = envelope.payload
    if isinstance(payload, dict) and set(payload) == RAW_RECORD_KEYS:
        return str(payload["body_sha256"])
    return envelope.id


def _why(envelope: Envelope) -> str:
    error = envelope.status.error
    return "" if error is None else f"at {error.actor}: {error.message[:300]}"


def outcome_of(envelope: Envelope, *, by: bool = False) -> Expect:
    # An end actor's record: error-end keeps only failed envelopes (it marks any other arrival
    # failed with its own reason), happy-end everything else.
    if envelope.status.phase is Phase.FAILED:
        error = envelope.status.error
        actor = error.actor if by and error is not None else None
        return Expect(ERROR_END, envelope.status.reason, actor)
    return HAPPY


@dataclass
class Tally:
    """How the inputs of one feed were accounted for."""

    tried: int
    recorded: int
    lost: list[str]
    duplicated: list[str]
    wrong: list[str]
    strays: list[str]
    outcomes: Counter[str]

    @property
    def problems(self) -> list[str]:
        """Every way the promise was broken, one line each: empty when all is accounted for."""
        return [
            *(f"lost: {label}" for label in self.lost),
            *(f"recorded twice: {label}" for label in self.duplicated),
            *(f"wrong outcome: {line}" for line in self.wrong),
            *(f"record of no input: {line}" for line in self.strays),
        ]


def tally(inputs: list[Hostile], records: list[Envelope]) -> Tally:
    """Match records to inputs by key; see the module docstring."""
    by_key = {key: (h, expect) for h in inputs for key, expect in h.keys.items()}
    assert len(by_key) == sum(len(h.keys) for h in inputs), "two inputs share a key"
    seen: dict[str, list[Envelope]] = {h.label: [] for h in inputs}
    wrong, strays = [], []
    outcomes: Counter[str] = Counter()
    for record in records:
        key = record_key(record)
        if key not in by_key:
            strays.append(f"{key} ({outcome_of(record)}) {_why(record)}")
            continue
        item, expect = by_key[key]
        seen[item.label].append(record)
        outcomes[str(outcome_of(record))] += 1
        if outcome_of(record, by=expect.by is not None) != expect:
            wrong.append(
                f"{item.label}: expected {expect}, got {outcome_of(record)} {_why(record)}"
            )
    lost = [h.label for h in inputs if not seen[h.label]]
    duplicated = [f"{h.label} x{len(seen[h.label])}" for h in inputs if len(seen[h.label]) > 1]
    return Tally(
        tried=len(inputs),
        recorded=sum(len(v) for v in seen.values()),
        lost=lost,
        duplicated=duplicated,
        wrong=wrong,
        strays=strays,
        outcomes=outcomes,
    )
