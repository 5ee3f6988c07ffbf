"""What time it is, as an input: decisions take `now`, loops take a `Clock`.

`SystemClock` is the production clock; tests pass their own so deadlines, backoff and
cooldowns are checked exactly. Wall time (`now`) stamps envelopes and checks deadlines;
monotonic time (`monotonic`) measures durations and drives timers.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Aware UTC wall-clock time."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; never goes back."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()
