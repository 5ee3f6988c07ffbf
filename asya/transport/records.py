"""End records: the interface to where final envelopes are kept for good (results, failures).

`happy-end` appends each final envelope to the namespace's **results**, `error-end` each
failure to its **failures**; `asya results` reads them back and `asya replay` resubmits
failures, writing each replay to the **replays** ledger. A `RecordStore` is an append-only log
per `RecordKind`, in which every record has an offset (its position, increasing, never reused)
and the time it was stored:

- `append(kind, body)` returns only once the record is durable: an end actor acks its message
  after that, never before (a crash in between records it twice, never zero times);
- `read(kind, start=..., follow=...)` yields records in offset order from `start` (the first
  kept, an offset, or a time). Without `follow` it ends at the log's end *as of the call*
  (records appended meanwhile are not waited for), so a listing always terminates; with
  `follow` it tails the log until the reader stops iterating;
- `resubmit(actor, body)` puts `body` on the actor's queue **and** appends it to the replays
  ledger, both or neither: what the ledger holds is exactly what was replayed, which is how a
  replay that was killed half-way is resumed without sending anything twice.

Records are kept by age and size (whichever runs out first), not forever. Implementations:
`asya.transport.memory_records` (the memory transport's, for local runs and tests) and
`asya.transport.rabbitmq_records` (RabbitMQ streams). An object store or a database can be
added behind the same protocol: it needs ordered offsets, a confirmed append, and for
`resubmit` an atomic "enqueue + ledger" (or an idempotent enqueue keyed by the ledger entry).
Each transport hands out its own store (`Transport.records`). This module does no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol

from asya.settings import TRANSPORT_DEFAULTS, TransportSettings


class RecordKind(enum.StrEnum):
    """Which log of a namespace a record belongs to."""

    RESULTS = "results"
    """Every envelope that reached `happy-end`."""
    FAILURES = "failures"
    """Every envelope that reached `error-end`."""
    REPLAYS = "replays"
    """Every failure `asya replay` resubmitted (the envelope as it was sent back)."""


def records_stream_name(namespace: str, kind: RecordKind) -> str:
    """The log of `kind` in `namespace`: `asya-{namespace}.{kind}` (no actor can have it)."""
    return f"asya-{namespace}.{kind.value}"


@dataclass(frozen=True, slots=True)
class Retention:
    """How long and how much of each log is kept; the oldest records go first.

    Defaults: those of `ASYA_RECORDS_MAX_AGE` and `ASYA_RECORDS_MAX_BYTES`.
    """

    max_age: str = TRANSPORT_DEFAULTS.records_max_age
    """A number and a unit, Y M D h m or s (RabbitMQ's `x-max-age`)."""
    max_bytes: int = TRANSPORT_DEFAULTS.records_max_bytes

    @classmethod
    def from_settings(cls, settings: TransportSettings) -> Retention:
        return cls(max_age=settings.records_max_age, max_bytes=settings.records_max_bytes)


@dataclass(frozen=True, slots=True)
class Start:
    """Where a read begins: the first record kept (neither set), an offset, or a time."""

    offset: int | None = None
    since: datetime | None = None
    """Records stored at or after this aware time."""


FIRST: Final = Start()


@dataclass(frozen=True, slots=True)
class Record:
    """One stored record: its position in its log, when it was stored, and its bytes."""

    kind: RecordKind
    offset: int
    stored_at: datetime
    body: bytes


class RecordStore(Protocol):
    """Append-only logs of final envelopes; see the module docstring."""

    async def declare(self, kind: RecordKind) -> None:
        """Make sure the log of `kind` exists (idempotent); end actors call it at start.

        Raises:
            SettingsError: the broker cannot keep this log (too old, or the log exists with
                another retention): the message names the broker and the setting to change.
            TransportError: the broker did not answer.
        """
        ...

    async def append(self, kind: RecordKind, body: bytes) -> None:
        """Add `body` to the log of `kind`; returns once it is durable.

        Raises:
            TransportError: the record was not confirmed (the caller must not ack).
        """
        ...

    def read(
        self, kind: RecordKind, *, start: Start = FIRST, follow: bool = False
    ) -> AsyncGenerator[Record, None]:
        """The records of `kind` from `start` on, in offset order (see the module docstring).

        Raises:
            TransportError: the log cannot be read.
        """
        ...

    async def resubmit(self, actor: str, body: bytes) -> None:
        """Put `body` on `actor`'s queue and in the replays ledger, both or neither.

        Raises:
            UnknownActorError: `actor` has no queue (nothing was sent or recorded).
            TransportError: the publish was not confirmed.
        """
        ...
