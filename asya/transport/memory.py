"""The in-memory transport: the embedded default, and a first-class test double.

Carries bytes, like a broker, so serialization, size limits and malformed bodies behave as
they do on RabbitMQ. Same guarantees as every transport (see `asya.transport.base`): unknown
actors raise on publish, prefetch bounds what a subscription holds, a subscription settles
only what it holds itself and a closed one requeues what it still owns, delayed publishes run
on the event loop's clock. On top, `join()` waits until the whole mesh is quiet — nothing
ready, unacked or delayed — which is how the local runner knows a run is over and how tests
wait for every envelope's fate. Its end records (`records`) are kept in lists, read the same
way as the broker's streams.

Everything runs on one event loop and no step awaits in between, so there are no locks: a
change wakes only who may gain from it (the waiting consumers of that queue; `join` while it
waits), not every waiter of the mesh. The local runner moves every envelope through here,
so that is its hot path.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import uuid
from dataclasses import dataclass, field

from asya.clock import Clock, SystemClock
from asya.errors import TransportError, UnknownActorError
from asya.transport.base import Message, QueueDepth, is_reply_queue_name, reply_queue_name
from asya.transport.memory_records import MemoryRecordStore


@dataclass
class _Queue:
    ready: collections.deque[Message] = field(default_factory=collections.deque)
    unacked: dict[int, Message] = field(default_factory=dict)
    waiting: list[asyncio.Future[None]] = field(default_factory=list)
    """Consumers of this queue waiting for a message, or for room under their prefetch."""

    def wake(self) -> None:
        """Something changed for this queue's consumers: each looks again."""
        _wake(self.waiting)


def _wake(waiting: list[asyncio.Future[None]]) -> None:
    for waiter in waiting:
        if not waiter.done():
            waiter.set_result(None)
    waiting.clear()


class MemorySubscription:
    """Consumes one queue of a MemoryTransport."""

    def __init__(self, transport: MemoryTransport, actor: str, prefetch: int) -> None:
        self._transport = transport
        self._actor = actor
        self._prefetch = prefetch
        self._owned: set[int] = set()
        self._closed = False
        self._paused = False

    async def get(self) -> Message | None:
        """The next message, or None once closed. Cancelling it takes nothing off the queue."""
        queue = self._transport._queue(self._actor)
        while not self._closed:
            if not self._paused and queue.ready and len(self._owned) < self._prefetch:
                message = queue.ready.popleft()
                queue.unacked[message.tag] = message
                self._owned.add(message.tag)
                return message
            # Taken only after waking, in the same step: a cancelled wait takes nothing.
            waiter = asyncio.get_running_loop().create_future()
            queue.waiting.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in queue.waiting:  # not woken: nobody else will take it off
                    queue.waiting.remove(waiter)
                raise
        return None

    async def ack(self, message: Message) -> None:
        if self._release(message.tag) is not None:
            self._transport._queue(self._actor).wake()  # room under the prefetch
            self._transport._changed()

    async def requeue(self, message: Message) -> None:
        held = self._release(message.tag)
        if held is not None:
            queue = self._transport._queue(self._actor)
            queue.ready.appendleft(_redelivered(held))
            queue.wake()
            self._transport._changed()

    def _release(self, tag: int) -> Message | None:
        """Take `tag` off what this subscription holds; None if it holds no such message."""
        if tag not in self._owned:
            return None
        self._owned.discard(tag)
        return self._transport._queue(self._actor).unacked.pop(tag)

    async def pause(self) -> None:
        self._paused = True

    async def resume(self) -> None:
        self._paused = False
        self._transport._queue(self._actor).wake()

    async def close(self) -> None:
        self._closed = True
        queue = self._transport._queue(self._actor)
        for tag in sorted(self._owned, reverse=True):
            message = queue.unacked.pop(tag, None)
            if message is not None:
                queue.ready.appendleft(_redelivered(message))
        self._owned.clear()
        self._transport._subscriptions.discard(self)
        queue.wake()
        self._transport._changed()


class MemoryReplyQueue:
    """A reply queue held by a MemoryTransport."""

    def __init__(self, transport: MemoryTransport, name: str) -> None:
        self._transport = transport
        self._name = name
        self.inbox: asyncio.Queue[bytes] = asyncio.Queue()

    @property
    def name(self) -> str:
        return self._name

    async def receive(self) -> bytes:
        return await self.inbox.get()

    async def close(self) -> None:
        self._transport._replies.pop(self._name, None)


class MemoryTransport:
    """Queues in this process; see the module docstring."""

    def __init__(self, namespace: str = "local", *, clock: Clock | None = None) -> None:
        self.namespace = namespace
        self.records = MemoryRecordStore(self.publish, clock or SystemClock())
        """The end records of this namespace (see `asya.transport.records`)."""
        self.parked: list[tuple[bytes, str]] = []
        """What end actors could not record, with why: the parking queue of this transport."""
        self._queues: dict[str, _Queue] = {}
        self._joining: list[asyncio.Future[None]] = []
        """`join` calls waiting for the mesh to be quiet."""
        self._tags = itertools.count(1)
        self._delayed: set[asyncio.TimerHandle] = set()
        self._firing: set[asyncio.Task[None]] = set()
        self._subscriptions: set[MemorySubscription] = set()
        self._replies: dict[str, MemoryReplyQueue] = {}
        self._closed = False

    @property
    def can_publish(self) -> bool:
        return not self._closed

    def _queue(self, actor: str) -> _Queue:
        queue = self._queues.get(actor)
        if queue is None:
            raise UnknownActorError(f"no queue for actor '{actor}'", actor=actor)
        return queue

    async def declare(self, actor: str) -> None:
        self._queues.setdefault(actor, _Queue())

    async def publish(self, actor: str, body: bytes, *, delay_ms: int = 0) -> None:
        if self._closed:
            raise TransportError("memory transport is closed")
        self._queue(actor)
        if delay_ms <= 0:
            await self._put(actor, body)
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            task = loop.create_task(self._put(actor, body, handle))
            self._firing.add(task)
            task.add_done_callback(self._firing.discard)

        handle = loop.call_later(delay_ms / 1000, fire)
        self._delayed.add(handle)

    async def _put(
        self, actor: str, body: bytes, handle: asyncio.TimerHandle | None = None
    ) -> None:
        # The delay ends and the message lands in one step, so the mesh never looks quiet in
        # between.
        if handle is not None:
            self._delayed.discard(handle)
        queue = self._queue(actor)
        queue.ready.append(Message(actor, body, next(self._tags)))
        queue.wake()

    async def subscribe(self, actor: str, *, prefetch: int) -> MemorySubscription:
        self._queue(actor)
        subscription = MemorySubscription(self, actor, prefetch)
        self._subscriptions.add(subscription)
        return subscription

    async def depth(self, actor: str) -> QueueDepth:
        queue = self._queue(actor)
        return QueueDepth(ready=len(queue.ready), unacked=len(queue.unacked))

    async def park(self, body: bytes, *, reason: str) -> None:
        if self._closed:
            raise TransportError("memory transport is closed")
        self.parked.append((body, reason))

    def is_reply_queue(self, name: str) -> bool:
        return is_reply_queue_name(self.namespace, name)

    async def open_reply_queue(self) -> MemoryReplyQueue:
        reply = MemoryReplyQueue(self, reply_queue_name(self.namespace, uuid.uuid4().hex))
        self._replies[reply.name] = reply
        return reply

    async def publish_reply(self, reply_to: str, body: bytes) -> None:
        if not self.is_reply_queue(reply_to):
            raise ValueError(f"'{reply_to}' is not a reply queue of namespace '{self.namespace}'")
        reply = self._replies.get(reply_to)
        if reply is not None:
            reply.inbox.put_nowait(body)

    def is_quiet(self) -> bool:
        """Nothing ready, unacked or waiting on a delay, in any queue."""
        return not self._delayed and all(
            not q.ready and not q.unacked for q in self._queues.values()
        )

    async def join(self) -> None:
        """Wait until the mesh is quiet (see `is_quiet`)."""
        while not self.is_quiet():
            waiter = asyncio.get_running_loop().create_future()
            self._joining.append(waiter)
            await waiter

    def _changed(self) -> None:
        """A message was settled or given back: `join` looks again (only then can the mesh
        turn quiet; a publish never makes it so)."""
        if self._joining:
            _wake(self._joining)

    async def aclose(self) -> None:
        self._closed = True
        self.records.closed = True
        for handle in self._delayed:
            handle.cancel()
        self._delayed.clear()
        for subscription in list(self._subscriptions):
            await subscription.close()


def _redelivered(message: Message) -> Message:
    return Message(message.actor, message.body, message.tag, redelivered=True)
