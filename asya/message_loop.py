"""MessageLoop: pull messages from one queue, hand them to a handler, settle each, drain on stop.

Owns the mechanics every queue consumer shares — subscribe, bounded concurrency, optional
batching (up to N messages or T milliseconds), pausing (stop receiving, keep what is held) and a
graceful stop: stop pulling, let in-flight work finish within a grace period, cancel what is
left and give back every message still owned.

It is also the one place where a message is settled. The handler decides nothing about acks:
it returns a `Settle` per message — `ACK` once everything the message produced is confirmed,
`REQUEUE` when it could not be (the broker failed us: not the message's fault). A handler that
raises is a bug in asya, not in the message; so that one bad message cannot take its
batch-mates down with it, a failed batch is handled again one message at a time, and only a
message that fails alone is requeued (on a quorum queue its delivery limit then sends it to
`error-end` as `DeliveryLimitExceeded`). An actor's loop is built by whoever runs the actor
(the sidecar, the local runner's mesh: `MessageLoop.for_actor`) around its `asya.consumer`;
the end actors (`asya.crew`) build their own. Its `hooks` (`asya.hooks`) hear what only it
sees: messages held (in flight), redeliveries, requeues.

Pipelined: a handler works in two phases, the call (user code) and the finish (routing,
publishing, confirms). With `depth` d > 0 a slot is held only for the call, and each of the
`concurrency` slots has up to d more calls queued behind it at the invoker, formed while the
current one runs, so a busy worker never waits on a round trip: `concurrency * (1 + depth)`
calls are handed out at once, and the prefetch covers them plus one finishing batch per slot.
With depth 0 a slot is held until its messages are settled, and the prefetch is
`concurrency * batch`: no overlap.
On stop the handler is told to `drain` first: calls queued and not started come back
`REQUEUE` at once, the running ones get the grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from asyncio import FIRST_COMPLETED
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from asya.actor import ActorConfig
from asya.hooks import NO_HOOKS, Hooks
from asya.transport.base import Message, Subscription, Transport

log = logging.getLogger(__name__)


class Settle(enum.Enum):
    """What becomes of a message once its handler is done with it."""

    ACK = "ack"
    """Done: whatever it produced is confirmed; remove it for good."""
    REQUEUE = "requeue"
    """Give it back for redelivery (counts as a delivery on quorum queues)."""


BatchHandler = Callable[[Sequence[Message]], Awaitable[Sequence[Settle]]]
"""Handles messages (one, unless the actor batches) and says how to settle each, in order."""

Finish = Callable[[], Awaitable[Sequence[Settle]]]
"""The second phase of handling messages: carry out what the call decided; how to settle each."""


class StepHandler(Protocol):
    """Handles messages in two phases: `call` holds a slot, the `Finish` it returns does not."""

    async def call(self, messages: Sequence[Message]) -> Finish: ...

    def drain(self) -> None:
        """Start no call that is queued and not started: each finishes as `REQUEUE`."""
        ...


@dataclass(frozen=True)
class OnePhase:
    """A `BatchHandler` as a `StepHandler` whose whole work holds the slot (end actors)."""

    handle: BatchHandler

    async def call(self, messages: Sequence[Message]) -> Finish:
        settles = await self.handle(messages)

        async def finish() -> Sequence[Settle]:
            return settles

        return finish

    def drain(self) -> None:
        return None


class LoopState(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    DRAINING = "draining"
    STOPPED = "stopped"


class MessageLoop:
    """Consumes one actor's queue with `concurrency` handler calls in flight."""

    def __init__(
        self,
        transport: Transport,
        actor: str,
        handler: StepHandler,
        *,
        concurrency: int = 1,
        depth: int = 0,
        batch: int | None = None,
        batch_wait_ms: int = 0,
        hooks: Hooks = NO_HOOKS,
    ) -> None:
        """`handler`: wrap a plain `BatchHandler` in `OnePhase` (it holds its slot for all its
        work). `depth`: calls queued behind each slot (see the module docstring)."""
        self._transport = transport
        self._actor = actor
        self._handler = handler
        self._concurrency = concurrency
        self._depth = depth
        self._batch = batch or 1
        self._batch_wait_s = batch_wait_ms / 1000
        self._slots = asyncio.Semaphore(concurrency * (1 + depth))
        self._inflight: set[asyncio.Task[None]] = set()
        self._subscription: Subscription | None = None
        self._puller: asyncio.Task[None] | None = None
        self._hooks = hooks
        self._pausing = asyncio.Lock()  # pause and resume each await: never interleaved
        self._cut = asyncio.Event()
        self.state = LoopState.STARTING

    @classmethod
    def for_actor(
        cls,
        transport: Transport,
        config: ActorConfig,
        handler: StepHandler,
        *,
        depth: int,
        hooks: Hooks = NO_HOOKS,
    ) -> MessageLoop:
        """The loop of one replica of the actor `config` describes (its concurrency and
        batching), with `depth` calls queued behind each slot (`ASYA_PIPELINE_DEPTH`)."""
        return cls(
            transport,
            config.name,
            handler,
            concurrency=config.concurrency,
            depth=depth,
            batch=config.batch,
            batch_wait_ms=config.batch_wait_ms,
            hooks=hooks,
        )

    async def start(self) -> None:
        """Subscribe and start pulling in the background."""
        prefetch = self.prefetch
        self._subscription = await self._transport.subscribe(self._actor, prefetch=prefetch)
        self._puller = asyncio.create_task(self._pull(self._subscription))
        self.state = LoopState.RUNNING

    @property
    def prefetch(self) -> int:
        """Messages held at once: the calls handed out, and (pipelined) one finishing batch per
        slot."""
        if self._depth == 0:
            return self._concurrency * self._batch
        return self._concurrency * (2 + self._depth) * self._batch

    async def pause(self) -> None:
        """Stop receiving new messages; those in hand stay owned and are still worked on."""
        async with self._pausing:
            if self.state is LoopState.RUNNING and self._subscription is not None:
                self.state = LoopState.PAUSED
                await self._subscription.pause()

    async def resume(self) -> None:
        """Receive again after `pause`.

        Raises:
            TransportError: the broker would not take the consumer back (still paused).
        """
        async with self._pausing:
            if self.state is LoopState.PAUSED and self._subscription is not None:
                await self._subscription.resume()
                self.state = LoopState.RUNNING

    async def stop(self, grace_s: float) -> None:
        """Stop pulling, give in-flight work `grace_s` to finish (less if `cut_short`), requeue
        the rest."""
        if self.state is LoopState.STOPPED:
            return
        self.state = LoopState.DRAINING
        if self._puller is not None:
            self._puller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._puller
        self._handler.drain()
        if self._inflight:
            finished = asyncio.ensure_future(asyncio.wait(set(self._inflight)))
            cut = asyncio.ensure_future(self._cut.wait())
            await asyncio.wait({finished, cut}, timeout=grace_s, return_when=FIRST_COMPLETED)
            finished.cancel()
            cut.cancel()
            pending = [task for task in self._inflight if not task.done()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._subscription is not None:
            # Gives back whatever is still owned: messages of cancelled calls included.
            await self._subscription.close()
        self.state = LoopState.STOPPED

    def cut_short(self) -> None:
        """Stop waiting for the calls in flight, now or in a drain to come: what they hold is
        given back at once (a runtime gone while its sidecar drains answers none of them)."""
        self._cut.set()

    @property
    def busy(self) -> int:
        """Handler calls in flight."""
        return len(self._inflight)

    async def _pull(self, subscription: Subscription) -> None:
        while True:
            await self._slots.acquire()
            try:
                messages = await self._next_batch(subscription)
            except BaseException:
                self._slots.release()
                raise
            if not messages:
                self._slots.release()
                return
            task = asyncio.create_task(self._run(messages))
            self._inflight.add(task)

    async def _next_batch(self, subscription: Subscription) -> list[Message]:
        first = await subscription.get()
        if first is None:
            return []
        messages = [first]
        if self._batch == 1:
            return messages
        # One deadline for the whole batch, not a timer (and a task) per message; a `get` that
        # the deadline cancels takes nothing off the queue.
        loop = asyncio.get_running_loop()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(loop.time() + self._batch_wait_s):
                while len(messages) < self._batch:
                    message = await subscription.get()
                    if message is None:
                        break
                    messages.append(message)
        return messages

    async def _run(self, messages: Sequence[Message]) -> None:
        redelivered = sum(1 for m in messages if m.redelivered)
        self._hooks.taken(self._actor, len(messages), redelivered=redelivered)
        slot = _Slot(self._slots)
        try:
            await self._process(messages, slot)
        finally:
            self._hooks.released(self._actor, len(messages))
            slot.release()
            task = asyncio.current_task()
            if task is not None:
                self._inflight.discard(task)

    async def _process(self, messages: Sequence[Message], slot: _Slot) -> None:
        try:
            finish = await self._handler.call(messages)
            if self._depth:
                slot.release()  # the worker is free: its next call starts while this one finishes
            settles = await finish()
        except Exception:
            # A process boundary: whatever went wrong, keep consuming and lose nothing.
            if len(messages) > 1:
                log.warning(
                    "batch failed; handling its messages one by one",
                    extra={"actor": self._actor, "batch": len(messages)},
                )
                for message in messages:
                    await self._process([message], slot)
                return
            log.exception("handling failed; message requeued", extra={"actor": self._actor})
            settles = [Settle.REQUEUE]
        for message, settle in zip(messages, settles, strict=True):
            await self._settle(message, settle)

    async def _settle(self, message: Message, settle: Settle) -> None:
        subscription = self._subscription
        assert subscription is not None  # it delivered `message`, and it settles it
        try:
            if settle is Settle.ACK:
                await subscription.ack(message)
            else:
                self._hooks.requeued(self._actor)
                await subscription.requeue(message)
        except Exception:  # the broker redelivers what it did not see settled: nothing is lost
            log.exception("settling failed", extra={"actor": self._actor, "settle": settle.value})


class _Slot:
    """One of the loop's call slots, released once however often `release` is called."""

    __slots__ = ("_held", "_slots")

    def __init__(self, slots: asyncio.Semaphore) -> None:
        self._slots = slots
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._slots.release()
