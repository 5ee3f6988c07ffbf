"""What `asya results` and `asya replay` decide about end records: filters, times, replays.

Pure functions of values (envelopes, records, `now`); the commands in `asya.cli.results` and
`asya.cli.replay` do the reading and publishing. A replay sends a failure back to the actor
that failed (`route.curr`) with the route it had left (`route.next`), as a fresh attempt:
`status.attempt` 1, phase `pending`, no reason; the failure's error is appended to
`status.retries`, so the history of what went wrong stays in the envelope. The replayed
envelope carries the header `asya-replay-of` = the failure's key (`{offset}:{envelope id}`
in the failures log): that header is how the replays ledger says which failures were sent
back, and how a final envelope shows it came from a replay.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

import msgspec

from asya.envelope import Envelope, Phase
from asya.routing import END_ACTORS
from asya.transport.records import Record

REPLAY_HEADER: Final = "asya-replay-of"
"""Envelope header on a replayed envelope: the key of the failure it replays."""

SINCE_FORMATS: Final = (
    "an ISO 8601 time (2026-05-01T12:00:00Z; no zone = UTC) or an age: a whole number and"
    " s, m, h or d (10m, 2h, 1d)"
)

_AGE: Final = re.compile(r"([1-9][0-9]*)([smhd])")
_UNITS: Final = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(text: str, now: datetime) -> datetime:
    """The aware time `text` means: an ISO 8601 time, or an age before `now` (`10m`).

    Raises:
        ValueError: `text` is neither; the message says what is expected.
    """
    age = _AGE.fullmatch(text.strip())
    if age is not None:
        return now - timedelta(**{_UNITS[age.group(2)]: int(age.group(1))})
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--since '{text}' is not a time: expected {SINCE_FORMATS}") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True, kw_only=True)
class Filters:
    """Which final envelopes a command looks at; a field left None matches all."""

    reason: str | None = None
    """`status.reason`, e.g. HandlerError."""
    actor: str | None = None
    """The actor the envelope ended at: the one that failed, or the last that ran."""
    envelope_id: str | None = None

    def matches(self, envelope: Envelope) -> bool:
        reason = envelope.status.reason
        return (
            (self.reason is None or (reason is not None and reason.value == self.reason))
            and (self.actor is None or ended_at(envelope) == self.actor)
            and (self.envelope_id is None or envelope.id == self.envelope_id)
        )


def ended_at(envelope: Envelope) -> str:
    """The actor an envelope ended at (`status.actor`, else where its route stands)."""
    return envelope.status.actor or envelope.route.curr


def failure_key(record: Record, envelope: Envelope) -> str:
    """A failure's identity in the failures log, stable across reads: `{offset}:{id}`."""
    return f"{record.offset}:{envelope.id}"


def replayed_key(envelope: Envelope) -> str | None:
    """The failure a replayed envelope (a ledger entry) was sent back for."""
    return envelope.headers.get(REPLAY_HEADER)


def is_replayable(envelope: Envelope) -> bool:
    """Whether there is an actor to send it back to (not bytes wrapped at an end actor)."""
    return envelope.route.curr not in END_ACTORS


def plan_replay(failure: Envelope, key: str, now: datetime) -> Envelope:
    """The envelope that sends `failure` back to where it failed (see the module docstring)."""
    status = failure.status
    retries = status.retries if status.error is None else (*status.retries, status.error)
    fresh = msgspec.structs.replace(
        status,
        phase=Phase.PENDING,
        actor=failure.route.curr,
        attempt=1,
        reason=None,
        error=None,
        retries=retries,
        updated_at=now,
    )
    headers = {**failure.headers, REPLAY_HEADER: key}
    return msgspec.structs.replace(failure, status=fresh, headers=headers)
