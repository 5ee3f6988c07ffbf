"""The memory transport's end records: the `RecordStore` of `asya.transport.records`, in lists.

Same contract as the broker's: offsets from 0 per log, a confirmed (here: immediate) append, a
read without `follow` that stops at the end as of the call, and `resubmit` that enqueues and
writes the ledger together. Retention is not applied: a local run is short. Owned by a
`MemoryTransport` (its `records`), which gives it the publish that `resubmit` uses.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, Awaitable, Callable

from asya.clock import Clock
from asya.errors import TransportError
from asya.transport.records import FIRST, Record, RecordKind, Start

Publish = Callable[[str, bytes], Awaitable[None]]


class MemoryRecordStore:
    """End records in this process; see the module docstring."""

    def __init__(self, publish: Publish, clock: Clock) -> None:
        self._publish = publish
        self._clock = clock
        self._logs: dict[RecordKind, list[Record]] = {kind: [] for kind in RecordKind}
        self._changed = asyncio.Condition()
        self.closed = False
        """Set by the owning transport's `aclose`: appends then fail like a lost broker."""

    def records(self, kind: RecordKind) -> list[Record]:
        """Everything stored in the log of `kind`, oldest first."""
        return list(self._logs[kind])

    async def declare(self, kind: RecordKind) -> None:
        return None

    async def append(self, kind: RecordKind, body: bytes) -> None:
        if self.closed:
            raise TransportError("memory transport is closed")
        async with self._changed:
            log = self._logs[kind]
            log.append(Record(kind, len(log), self._clock.now(), body))
            self._changed.notify_all()

    async def read(
        self, kind: RecordKind, *, start: Start = FIRST, follow: bool = False
    ) -> AsyncGenerator[Record, None]:
        log = self._logs[kind]
        end = len(log)
        position = start.offset or 0
        while True:
            while position < (len(log) if follow else end):
                record = log[position]
                position += 1
                if start.since is None or record.stored_at >= start.since:
                    yield record
            if not follow:
                return
            async with self._changed:
                await self._changed.wait_for(functools.partial(_grew, log, position))

    async def resubmit(self, actor: str, body: bytes) -> None:
        # The publish raises before anything is recorded; once it is done nothing else can
        # fail: enqueue and ledger together, as on the broker.
        await self._publish(actor, body)
        await self.append(RecordKind.REPLAYS, body)


def _grew(log: list[Record], seen: int) -> bool:
    return len(log) > seen
