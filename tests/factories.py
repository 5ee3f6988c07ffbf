"""Small builders for the values tests are made of."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from asya.envelope import Envelope, Route, Status

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def envelope(
    curr: str = "a",
    next: Sequence[str] = (),
    prev: Sequence[str] = (),
    *,
    id: str = "e1",
    payload: Any = None,
    attempt: int = 1,
    deadline_at: datetime | None = None,
    headers: dict[str, str] | None = None,
    parent_id: str | None = None,
) -> Envelope:
    return Envelope(
        id=id,
        parent_id=parent_id,
        route=Route(prev=tuple(prev), curr=curr, next=tuple(next)),
        headers=dict(headers or {}),
        status=Status(attempt=attempt, created_at=T0, updated_at=T0, deadline_at=deadline_at),
        payload={"n": 1} if payload is None else payload,
    )


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime = T0) -> None:
        self._now = start
        self._mono = 0.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._mono += seconds


def rng(seed: int = 7) -> random.Random:
    return random.Random(seed)
