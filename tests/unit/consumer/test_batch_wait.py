"""The batch wait bound, on the event loop's own clock (looptime: a loop whose time jumps to
its next timer, so these read loop time, never the wall clock): a batch is handed over when
it is full or when its first message has waited `batch_wait_ms`, whichever comes first."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import looptime

from asya.message_loop import MessageLoop, OnePhase, Settle
from asya.transport.base import Message
from asya.transport.memory import MemoryTransport


def on_loop_time(test: Callable[[], Awaitable[list[tuple[float, int]]]]) -> list[tuple[float, int]]:
    loop = looptime.new_event_loop(start=0)
    try:
        return loop.run_until_complete(test())
    finally:
        loop.close()


async def batches_seen(
    *, batch: int, wait_ms: int, arrivals_s: Sequence[float], expected: int
) -> list[tuple[float, int]]:
    """(loop time, size) of each batch handed to the handler, for messages published at
    `arrivals_s`."""
    transport = MemoryTransport()
    await transport.declare("a")
    seen: list[tuple[float, int]] = []
    done = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def handle(messages: Sequence[Message]) -> list[Settle]:
        seen.append((round(loop.time(), 3), len(messages)))
        if sum(size for _, size in seen) == expected:
            done.set()
        return [Settle.ACK] * len(messages)

    message_loop = MessageLoop(transport, "a", OnePhase(handle), batch=batch, batch_wait_ms=wait_ms)
    await message_loop.start()
    started = loop.time()
    for n, at in enumerate(arrivals_s):
        await asyncio.sleep(max(0.0, started + at - loop.time()))
        await transport.publish("a", b"m%d" % n)
    await done.wait()
    await message_loop.stop(1)
    return seen


def test_a_partial_batch_is_handed_over_when_its_first_message_has_waited_batch_wait_ms():
    seen = on_loop_time(lambda: batches_seen(batch=8, wait_ms=50, arrivals_s=[0, 0, 0], expected=3))

    assert seen == [(0.05, 3)]


def test_a_full_batch_is_handed_over_at_once_however_long_the_wait():
    seen = on_loop_time(
        lambda: batches_seen(batch=4, wait_ms=600_000, arrivals_s=[0] * 8, expected=8)
    )

    assert seen == [(0.0, 4), (0.0, 4)]


def test_the_wait_counts_from_each_batchs_first_message():
    seen = on_loop_time(
        lambda: batches_seen(batch=8, wait_ms=50, arrivals_s=[0, 0.03, 0.07], expected=3)
    )

    assert seen == [(0.05, 2), (0.12, 1)]


def test_with_no_wait_a_batch_takes_what_is_already_queued_and_waits_for_nothing_more():
    async def queued_first() -> list[tuple[float, int]]:
        transport = MemoryTransport()
        await transport.declare("a")
        for n in range(5):
            await transport.publish("a", b"m%d" % n)
        seen: list[tuple[float, int]] = []
        loop = asyncio.get_running_loop()
        done = asyncio.Event()

        async def handle(messages: Sequence[Message]) -> list[Settle]:
            seen.append((round(loop.time(), 3), len(messages)))
            if sum(size for _, size in seen) == 5:
                done.set()
            return [Settle.ACK] * len(messages)

        message_loop = MessageLoop(transport, "a", OnePhase(handle), batch=8, batch_wait_ms=0)
        await message_loop.start()
        await done.wait()
        await message_loop.stop(1)
        return seen

    assert on_loop_time(queued_first) == [(0.0, 5)]
