"""Reaching the broker at start: retry with backoff until it answers or the process is told
to stop.

The one loop the long-running processes share (`asya-sidecar`, `asya serve`): a broker that is
down or refuses the credentials at start is normal while a cluster comes up, so each failed
attempt is one line (`say`), never a traceback, and SIGTERM while waiting is a clean stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from asya.errors import TransportError
from asya.retry import RetryPolicy, backoff_ms

T = TypeVar("T")

BROKER_BACKOFF: Final = RetryPolicy(base_delay_ms=500, factor=2.0, max_delay_ms=30_000, jitter=0.2)
"""Backoff between attempts to reach the broker: 0.5 s doubling to 30 s."""


async def connect_until_stopped(
    connect: Callable[[], Awaitable[T]],
    *,
    stop: asyncio.Event,
    rng: random.Random,
    say: Callable[[str], None],
) -> T | None:
    """What `connect` returns once it succeeds; None if `stop` is set first.

    `connect` raises `TransportError` for an attempt that failed; `say` gets one line each.
    """
    attempt = 1
    while not stop.is_set():
        try:
            return await connect()
        except TransportError as exc:
            delay_s = backoff_ms(BROKER_BACKOFF, attempt, rng) / 1000
            say(f"{exc}; retrying in {delay_s:.1f} s")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay_s)
        attempt += 1
    return None
