"""Settling one consumer channel's deliveries: acks asked for together go as one frame.

The broker numbers a channel's deliveries 1, 2, 3, …, and `basic.ack(tag, multiple=True)`
settles every unsettled delivery up to `tag` at once. `ChannelAcks` keeps the channel's
unsettled deliveries in that order. An ack is not sent when asked for but within a short window
(`window_s`, `ASYA_ACK_WINDOW_MS`), with every other ack asked for in it: the run of deliveries
from the oldest unsettled one on that are all acked goes as one `multiple` ack; an acked
delivery behind one still being worked on goes as an ack of its own (holding it back until the
slow one is done would keep a prefetch slot busy for as long as that takes). So a multiple ack
never covers a delivery that is not done: each one it settles had its outputs confirmed before
its ack was asked for, as with single acks. A requeue (`basic.nack`) sends the acks asked for
before it first, and is never covered by a multiple ack: until its own frame is written (for
good, if that fails or is cancelled) it stops every run of acks behind it.

Why a window: each ack frame costs the broker a settlement (on a quorum queue, a Raft command)
and the consumer a write; a window of a few milliseconds lets the acks of a saturated consumer
that finishes messages out of order go several to a frame. Acks held back keep their prefetch
slots, so they go at once, without waiting out the window, when `hold` of them are waiting
(the subscription makes that a quarter of its prefetch, so the window applies from a prefetch
of 8 up), and whenever the consumer runs out of deliveries while its prefetch is full
(`send_waiting`): a consumer never waits out the window for its own acks, at most the broker's
round trip. A window of 0 sends them at the end of the event loop's iteration.

Deferring an ack changes nothing a crash could lose: a delivery whose ack was never written is
redelivered. It widens only the span in which a crash redelivers a message whose outputs were
already confirmed (a duplicate downstream, as at-least-once allows) by the window. A
subscription that closes flushes first: what waits is sent. One `ChannelAcks` per underlying
(aiormq) channel: tags start again at 1 on a channel reopened after a lost connection, whose
old deliveries the broker has already taken back.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

import aiormq.abc

log = logging.getLogger(__name__)

_WORKING: Final = 0
_ACKED: Final = 1
_REQUEUING: Final = 2
"""A delivery whose nack may not have reached the broker: it stops every run of acks after it
until its nack is written (for good, if that fails or is cancelled: later acks then go one by
one, which is always safe)."""


class ChannelAcks:
    """See the module docstring."""

    def __init__(
        self,
        channel: aiormq.abc.AbstractChannel,
        actor: str,
        *,
        window_s: float = 0.0,
        hold: int = 1,
    ) -> None:
        """`window_s`: how long an ack may wait for others to go with; `hold`: the count of
        acks waiting that sends them all at once (fewer than `hold` ever wait)."""
        self.channel = channel
        self._actor = actor
        self._window_s = window_s
        self._hold = max(1, hold)
        self._unsettled: dict[int, int] = {}
        """Delivery tag -> _WORKING, _ACKED or _REQUEUING; in delivery order (tags grow)."""
        self._waiting = 0
        """Acks asked for and not taken to be sent yet."""
        self._window: asyncio.TimerHandle | None = None
        """Ends the window of the acks waiting: they are sent then."""
        self._scheduled = False
        self._flushes: set[asyncio.Task[None]] = set()
        self._sending = asyncio.Lock()
        """Held from taking tags off `_unsettled` until their frames are written: a multiple
        ack taken later must not reach the broker before a frame taken earlier, or it would
        settle that frame's tag first (and the broker closes the channel on the second)."""
        self.frames = 0
        """Ack frames sent: fewer than the deliveries acked when acks were batched."""

    def delivered(self, tag: int) -> None:
        self._unsettled[tag] = _WORKING

    def ack(self, tag: int) -> None:
        """Ack `tag` within the window, with the other acks asked for in it."""
        if self._unsettled.get(tag) != _WORKING:
            return
        self._unsettled[tag] = _ACKED
        self._waiting += 1
        if self._window_s <= 0 or self._waiting >= self._hold:
            self._send_soon()
        else:
            self._open_window()

    @property
    def unsettled(self) -> int:
        """Deliveries of the channel not settled on the broker yet: each takes a prefetch slot."""
        return len(self._unsettled)

    def send_waiting(self) -> None:
        """Send the acks waiting for their window at the end of this loop iteration (the
        consumer is out of deliveries and its prefetch is full: they are what the broker waits
        for)."""
        if self._waiting:
            self._send_soon()

    def _open_window(self) -> None:
        """Send the acks waiting once the window ends (it is open already: nothing changes)."""
        if self._window is None:
            self._window = asyncio.get_running_loop().call_later(self._window_s, self._send_soon)

    def _close_window(self) -> None:
        if self._window is not None:
            self._window.cancel()
            self._window = None

    def _send_soon(self) -> None:
        """Send the acks waiting at the end of this loop iteration."""
        self._close_window()
        if not self._scheduled:
            self._scheduled = True
            task = asyncio.get_running_loop().create_task(self._flush_soon())
            self._flushes.add(task)
            task.add_done_callback(self._flush_ended)

    def _flush_ended(self, task: asyncio.Task[None]) -> None:
        self._flushes.discard(task)
        if task.cancelled():
            # Perhaps before it began: the next ack schedules a flush of its own, and the acks
            # waiting still have a window that ends.
            self._scheduled = False
            if self._waiting:
                self._open_window()

    async def nack(self, tag: int) -> None:
        """Give `tag` back to the queue now, after the acks asked for before it.

        Raises:
            aiormq.exceptions.AMQPError, ChannelInvalidStateError: the channel is gone (the
                broker takes the delivery back with it).
        """
        async with self._sending:
            await self._send_acked()
            if tag not in self._unsettled:
                return
            self._unsettled[tag] = _REQUEUING
            await self.channel.basic_nack(tag, requeue=True)
            del self._unsettled[tag]

    async def flush(self) -> None:
        """Send every ack asked for so far, without waiting out the window."""
        async with self._sending:
            await self._send_acked()

    async def _send_acked(self) -> None:
        first, last, singles = self._take_acked()
        try:
            if last is not None:
                await self.channel.basic_ack(last, multiple=last != first)
                self.frames += 1
            for tag in singles:
                await self.channel.basic_ack(tag)
                self.frames += 1
        except Exception as exc:
            # The channel died with these deliveries on it: the broker redelivers them.
            log.warning(
                "acks lost with their channel; expect redeliveries",
                extra={"actor": self._actor, "error": repr(exc)},
            )

    async def _flush_soon(self) -> None:
        # A task's first step runs after the callbacks already ready: every ack asked for by
        # the handlers woken in this iteration is in by then. An ack asked for while this one
        # sends schedules the next.
        self._scheduled = False
        await self.flush()

    def _take_acked(self) -> tuple[int | None, int | None, list[int]]:
        """The first and last tags of the acked run at the front (None: no such run) and the
        acked tags behind an unacked one; none of them unsettled any more."""
        first: int | None = None
        last: int | None = None
        singles: list[int] = []
        in_front = True
        for tag, state in self._unsettled.items():
            if state != _ACKED:
                in_front = False
            elif in_front:
                first = tag if first is None else first
                last = tag
            else:
                singles.append(tag)
        for tag in [t for t in self._unsettled if last is not None and t <= last] + singles:
            del self._unsettled[tag]
        self._waiting = 0  # every acked tag is taken: no window left to wait out
        self._close_window()
        return first, last, singles
