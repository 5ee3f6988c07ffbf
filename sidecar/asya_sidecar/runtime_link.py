"""The sidecar's link to the runtime: an Invoker that waits out a runtime restart.

Wraps `asya.runtime.client.RuntimeClient`. A call made while the runtime is unreachable
(starting, restarting after `kill -9`, replaced by Kubernetes) reconnects with backoff for up
to `wait_s`; only then does it raise `RuntimeUnavailableError`, and the consumer gives the
envelope back to the queue. A runtime that is down is never the envelope's fault: nothing
goes to `error-end` for it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence

from asya.clock import Clock
from asya.envelope import Envelope
from asya.errors import RuntimeUnavailableError
from asya.outcome import Outcome
from asya.retry import RetryPolicy, backoff_ms
from asya.runtime.client import RuntimeClient
from asya.runtime.frames import Pong

log = logging.getLogger(__name__)

RECONNECT = RetryPolicy(base_delay_ms=100, factor=2.0, max_delay_ms=5_000, jitter=0.2)
"""Backoff between attempts to reach the runtime."""


class RuntimeLink:
    """Invoker over the runtime socket that reconnects; see the module docstring."""

    def __init__(
        self, socket_path: str, *, wait_s: float, clock: Clock, rng: random.Random
    ) -> None:
        self._path = socket_path
        self._wait_s = wait_s
        self._clock = clock
        self._rng = rng
        self._client: RuntimeClient | None = None
        self._lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self._client is not None and self._client.connected

    async def connect(self) -> RuntimeClient:
        """A connected client, reconnecting with backoff for up to `wait_s`.

        Raises:
            RuntimeUnavailableError: the runtime did not answer in time.
        """
        async with self._lock:
            if self._client is not None and self._client.connected:
                return self._client
            deadline = self._clock.monotonic() + self._wait_s
            attempt = 1
            while True:
                client = RuntimeClient(self._path)
                try:
                    await client.connect()
                    self._client = client
                    return client
                except RuntimeUnavailableError:
                    if self._clock.monotonic() >= deadline:
                        log.warning(
                            "runtime unreachable; giving the envelope back",
                            extra={"socket": self._path},
                        )
                        raise
                    if attempt == 1:
                        # Normal while a pod starts or a runtime restarts: not worth a warning.
                        log.info("runtime unreachable; retrying", extra={"socket": self._path})
                    await asyncio.sleep(backoff_ms(RECONNECT, attempt, self._rng) / 1000)
                    attempt += 1

    async def ping(self) -> Pong:
        """What the runtime serves (waits for it as `connect` does)."""
        client = await self.connect()
        return await client.ping()

    async def invoke(self, envelopes: Sequence[Envelope]) -> list[Outcome]:
        client = await self.connect()
        return await client.invoke(envelopes)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
