"""The sidecar's link to the runtime: an Invoker that holds its calls through a runtime outage.

Wraps `asya.runtime.client.RuntimeClient`. One task, the keeper, owns the connection: it
connects with backoff for as long as it takes, and again whenever the connection goes down (the
runtime starting, restarted after `kill -9`, replaced by Kubernetes). A call made while the
runtime is unreachable, or cut by a broken connection, is neither failed nor given back: it
waits for the runtime and is sent again once it answers. A runtime that is down is never the
envelope's fault, and its messages stay unacked on the sidecar's channel meanwhile, so no
delivery is counted against the quorum queue's limit. At-least-once: a call cut mid-way may
have run, and runs again (handlers should be idempotent).

When the runtime has been unreachable for longer than `wait_s`, the link is `DOWN` and awaits
`on_down` (the sidecar stops consuming and reports not ready, so other replicas take the
queue); when the runtime answers again, `on_up`, retried with backoff until it succeeds (the
broker may refuse the consumer back for a while). Before the runtime has answered once
(`CONNECTING`) neither is called: the sidecar does not consume until then.

A call that the runtime itself dies of (not a worker: those are answered `WorkerCrashed`) would
be cut and sent again for ever, never counted as a delivery. After `MAX_CUTS` cuts of the same
call, its envelopes are answered `WorkerCrashed` instead, and the retry policy takes over.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
from collections.abc import Awaitable, Callable, Sequence

from asya.clock import Clock
from asya.envelope import Envelope
from asya.errors import RuntimeProtocolError, RuntimeUnavailableError
from asya.outcome import Outcome, worker_crashed
from asya.retry import RetryPolicy, backoff_ms
from asya.runtime.client import RuntimeClient
from asya.runtime.frames import Pong

log = logging.getLogger(__name__)

RECONNECT = RetryPolicy(base_delay_ms=100, factor=2.0, max_delay_ms=5_000, jitter=0.2)
"""Backoff between attempts to reach the runtime."""

MAX_CUTS = 3
"""Times one call may be cut by a lost runtime connection before it is failed, not resent."""

Hook = Callable[[], Awaitable[None]]


class LinkState(enum.Enum):
    CONNECTING = "connecting"
    """The runtime has not answered yet since start."""
    UP = "up"
    LOST = "lost"
    """Unreachable for less than `wait_s`: calls wait, consuming goes on."""
    DOWN = "down"
    """Unreachable for longer than `wait_s`: `on_down` was told."""
    CLOSED = "closed"


class RuntimeLink:
    """Invoker over the runtime socket that waits out outages; see the module docstring."""

    def __init__(
        self,
        socket_path: str,
        *,
        wait_s: float,
        clock: Clock,
        rng: random.Random,
        on_down: Hook,
        on_up: Hook,
        direct_depth: int | None = None,
    ) -> None:
        """`direct_depth`: call the runtime's workers on their own sockets where the runtime
        names them, that many calls queued per running one (`RuntimeClient`)."""
        self._path = socket_path
        self._direct_depth = direct_depth
        self._wait_s = wait_s
        self._clock = clock
        self._rng = rng
        self._on_down = on_down
        self._on_up = on_up
        self._client: RuntimeClient | None = None
        self._changed = asyncio.Condition()
        self._keeper: asyncio.Task[None] | None = None
        self.state = LinkState.CONNECTING
        self._paused = False
        """`on_down` was told and `on_up` has not succeeded since: the next runtime that answers
        resumes consuming, whichever connection it comes on."""
        self.failed = False
        """The link broke for good (its keeper died): the sidecar is no longer live."""

    def is_up(self) -> bool:
        """Whether the runtime answers now (`asya_runtime_up`)."""
        return self.state is LinkState.UP

    @property
    def is_available(self) -> bool:
        """Whether calls can be expected to be answered: up, or lost for less than `wait_s`."""
        return self.state in (LinkState.UP, LinkState.LOST)

    async def ping(self) -> Pong:
        """What the runtime serves, once it answers (waits for it as long as it takes).

        Raises:
            RuntimeUnavailableError: the link was closed while waiting.
        """
        client = await self._connected()
        assert client.pong is not None
        return client.pong

    async def invoke(self, envelopes: Sequence[Envelope]) -> list[Outcome]:
        """The runtime's outcomes for `envelopes`, however long it is unreachable.

        Raises:
            RuntimeUnavailableError: the link was closed while waiting.
            RuntimeProtocolError: the runtime answered the call with something else.
        """
        for _ in range(MAX_CUTS):
            client = await self._connected()
            try:
                return await client.invoke(envelopes)
            except RuntimeUnavailableError:
                # Cut mid-way: hold the envelopes and send the call again once the runtime is back.
                log.info("runtime call cut; it will be sent again", extra={"socket": self._path})
        log.warning(
            "runtime connection lost during the same call repeatedly; failing it",
            extra={"socket": self._path, "cuts": MAX_CUTS},
        )
        crashed = worker_crashed(f"the runtime went away {MAX_CUTS} times during this call")
        return [crashed] * len(envelopes)

    def drain(self) -> None:
        """The runtime starts none of the calls it holds that have not started yet (see
        `RuntimeClient.drain`); a call waiting for the runtime to come back is still sent."""
        if self._client is not None:
            self._client.drain()

    async def aclose(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
        if self._client is not None:
            await self._client.aclose()
        async with self._changed:
            self._client = None
            self.state = LinkState.CLOSED
            self._changed.notify_all()

    async def _connected(self) -> RuntimeClient:
        if self._keeper is None and self.state is not LinkState.CLOSED:
            self._keeper = asyncio.create_task(self._keep_connected())
            self._keeper.add_done_callback(self._keeper_ended)
        async with self._changed:
            await self._changed.wait_for(lambda: self._usable() or self.state is LinkState.CLOSED)
            if self._client is None or self.state is LinkState.CLOSED:
                raise RuntimeUnavailableError(f"the link to the runtime at {self._path} is closed")
            return self._client

    def _keeper_ended(self, keeper: asyncio.Task[None]) -> None:
        if keeper.cancelled() or keeper.exception() is None:
            return
        # Calls waiting for the runtime would wait for ever: close the link, so they fail and
        # the sidecar stops being live (the kubelet restarts it).
        log.error("runtime link failed", exc_info=keeper.exception(), extra=self._fields())
        self.state = LinkState.CLOSED
        self.failed = True
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _usable(self) -> bool:
        return self._client is not None and self._client.connected

    async def _keep_connected(self) -> None:
        while True:
            client = await self._reach()
            async with self._changed:
                self._client = client
                self.state = LinkState.UP
                self._changed.notify_all()
            if self._paused:
                log.warning("runtime answers again; consuming resumes", extra=self._fields())
                await self._resume(client)
            await client.wait_closed()
            log.warning("runtime connection lost; calls wait for it", extra=self._fields())
            async with self._changed:
                self._client = None
                self.state = LinkState.LOST
                self._changed.notify_all()
            await client.aclose()

    async def _reach(self) -> RuntimeClient:
        """A connected client, after as many attempts as it takes."""
        since = self._clock.monotonic()
        overdue = False
        attempt = 1
        while True:
            client = RuntimeClient(self._path, direct_depth=self._direct_depth)
            try:
                await client.connect()
                return client
            except RuntimeUnavailableError as exc:
                reason = str(exc)
                if attempt == 1:
                    # Normal while a pod starts or a runtime restarts: not worth a warning.
                    log.info(
                        "runtime unreachable; retrying", extra={**self._fields(), "error": reason}
                    )
            except RuntimeProtocolError as exc:
                reason = str(exc)
                if attempt == 1:
                    # Not a runtime this sidecar serves (another frame protocol): the pod needs
                    # another image, and the message says which. Tried again all the same.
                    log.error("runtime refused", extra={**self._fields(), "error": reason})
            delay_s = backoff_ms(RECONNECT, attempt, self._rng) / 1000
            if not overdue:
                left_s = since + self._wait_s - self._clock.monotonic()
                if left_s > 0:
                    delay_s = min(delay_s, left_s)
                else:
                    overdue = True
                    await self._overdue(reason)
            await asyncio.sleep(delay_s)
            attempt += 1

    async def _overdue(self, reason: str) -> None:
        """The runtime has been unreachable for `wait_s`."""
        fields = {**self._fields(), "wait_s": self._wait_s, "error": reason}
        if self.state is LinkState.CONNECTING:
            log.warning(
                "runtime not answering since start; waiting for it, not ready", extra=fields
            )
            return
        self.state = LinkState.DOWN
        self._paused = True
        log.warning(
            "runtime unreachable past the wait; consuming stops until it answers", extra=fields
        )
        await self._tell(self._on_down)

    async def unreachable(self) -> None:
        """Return once the runtime is unreachable (its connection lost, or the link closed)."""
        gone = (LinkState.LOST, LinkState.DOWN, LinkState.CLOSED)
        async with self._changed:
            await self._changed.wait_for(lambda: self.state in gone)

    async def _resume(self, client: RuntimeClient) -> None:
        """`on_up`, again with backoff until it succeeds; if `client` stops being usable first
        (the runtime gone, or draining, again), the next connection's turn resumes."""
        attempt = 1
        while client.connected:
            try:
                await self._on_up()
                self._paused = False
                return
            except Exception as exc:  # the broker may refuse the consumer back for a while
                log.warning(
                    "consuming could not resume; retrying",
                    extra={**self._fields(), "error": str(exc)},
                )
            await asyncio.sleep(backoff_ms(RECONNECT, attempt, self._rng) / 1000)
            attempt += 1

    async def _tell(self, hook: Hook) -> None:
        try:
            await hook()
        except Exception:
            # The keeper must outlive a failed hook (the broker may be down too), or every call
            # waiting for the runtime would wait forever.
            log.exception("runtime link hook failed", extra=self._fields())

    def _fields(self) -> dict[str, object]:
        return {"socket": self._path, "state": self.state.value}
