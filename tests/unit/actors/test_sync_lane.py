"""Sync calls waiting behind a running one: each starts on the thread that ended the one before
it, without a round trip through the event loop; a drain, a timeout and a cancelled caller
never lose one and never run one that was turned away."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from asya import actor
from asya.actor import spec_of
from asya.envelope import Reason
from asya.handler import LocalInvoker, _SyncLane
from asya.outcome import NotStarted, Success
from asya.retry import RetryPolicy
from tests.factories import envelope

BOUND_S = 10
"""How long a test waits for something that must happen (a bound, not a timing claim)."""


def item(n: int):
    return envelope("x", ["next"], id=f"e{n}", payload={"n": n})


async def running(first: threading.Event) -> None:
    """Wait (off the loop) until the first call runs, then let the calls behind it be queued."""
    assert await asyncio.to_thread(first.wait, BOUND_S)
    await asyncio.sleep(0)


class Held:
    """A sync actor each of whose calls records its item's `n`, says a call runs (`first`),
    and holds until `release` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.first = threading.Event()
        self.ran: list[int] = []

        @actor(name="x")
        def device(doc):
            self.ran.append(doc["n"])
            self.first.set()
            self.release.wait(BOUND_S)
            return doc

        self.spec = spec_of(device)


async def test_the_next_call_starts_on_the_thread_that_ended_the_last_while_the_loop_waits():
    release = threading.Event()
    second_started = threading.Event()
    threads = []

    first = threading.Event()

    @actor(name="x")
    def device(doc):
        threads.append(threading.get_ident())
        if doc["n"] == 1:
            first.set()
            release.wait(BOUND_S)
        else:
            second_started.set()
        return doc

    invoker = LocalInvoker(spec_of(device), slots=1)
    try:
        one = asyncio.ensure_future(invoker.invoke([item(1)]))
        two = asyncio.ensure_future(invoker.invoke([item(2)]))
        await running(first)  # the second call is submitted and waits behind the first

        # The loop is held here: the second call can only start without it.
        release.set()
        started_without_the_loop = second_started.wait(BOUND_S)

        assert started_without_the_loop
        assert threads[0] == threads[1]
        assert [o.outputs[0].payload for [o] in await asyncio.gather(one, two)] == [
            {"n": 1},
            {"n": 2},
        ]
    finally:
        await invoker.aclose()


async def test_a_drain_turns_away_the_waiting_calls_and_the_running_one_ends_as_usual():
    held = Held()

    invoker = LocalInvoker(held.spec, slots=1)
    try:
        calls = [asyncio.ensure_future(invoker.invoke([item(n)])) for n in (1, 2, 3)]
        await running(held.first)

        invoker.drain()
        held.release.set()
        outcomes = [o for call in calls for o in await call]

        assert isinstance(outcomes[0], Success)
        assert outcomes[1:] == [NotStarted(), NotStarted()]
        assert held.ran == [1]
        # Later calls are served as usual.
        [later] = await invoker.invoke([item(4)])
        assert isinstance(later, Success)
    finally:
        await invoker.aclose()


async def test_a_timed_out_call_gives_its_place_to_the_next_at_once_on_a_new_thread():
    stuck = threading.Event()

    @actor(name="x", timeout_s=0.05, retry=RetryPolicy(retry_timeouts=False))
    def device(doc):
        if doc["n"] == 1:
            stuck.wait(BOUND_S)
        return doc

    invoker = LocalInvoker(spec_of(device), slots=1)  # in-process: its thread is left running
    try:
        first = asyncio.ensure_future(invoker.invoke([item(1)]))
        await asyncio.sleep(0)
        [second] = await invoker.invoke([item(2)])
        [timed_out] = await first

        assert not stuck.is_set()  # the first still runs: the second did not wait for it
        assert isinstance(second, Success)
        assert timed_out.reason is Reason.TIMEOUT
    finally:
        stuck.set()
        await invoker.aclose()


async def test_a_call_whose_caller_gives_up_before_it_starts_never_runs():
    held = Held()

    invoker = LocalInvoker(held.spec, slots=1)
    try:
        one = asyncio.ensure_future(invoker.invoke([item(1)]))
        second = asyncio.ensure_future(invoker.invoke([item(2)]))
        await running(held.first)

        second.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await second  # its caller has given up before the first call ended
        held.release.set()
        [done] = await one

        assert isinstance(done, Success)
        assert second.cancelled()
        [third] = await invoker.invoke([item(3)])  # the place was not lost
        assert isinstance(third, Success)
        assert held.ran == [1, 3]
    finally:
        await invoker.aclose()


async def test_a_batch_actor_s_waiting_batch_is_turned_away_whole_by_a_drain():
    release = threading.Event()
    first = threading.Event()
    batches = []

    @actor(name="x", batch=2)
    def device(docs):
        batches.append([d["n"] for d in docs])
        first.set()
        release.wait(BOUND_S)
        return docs

    invoker = LocalInvoker(spec_of(device), slots=1)
    try:
        one = asyncio.ensure_future(invoker.invoke([item(1), item(2)]))
        second = asyncio.ensure_future(invoker.invoke([item(3), item(4)]))
        await running(first)

        invoker.drain()
        release.set()

        assert all(isinstance(o, Success) for o in await one)
        assert await second == [NotStarted(), NotStarted()]
        assert batches == [[1, 2]]
    finally:
        await invoker.aclose()


async def test_a_call_turned_away_whose_caller_then_gives_up_is_not_taken_for_a_stuck_one():
    held = Held()
    abandoned = []

    invoker = LocalInvoker(held.spec, slots=1, on_abandon=lambda: abandoned.append(1))
    try:
        one = asyncio.ensure_future(invoker.invoke([item(1)]))
        two = asyncio.ensure_future(invoker.invoke([item(2)]))
        await running(held.first)

        invoker.drain()
        two.cancel()  # in the same step as the drain, before its caller saw the answer
        with contextlib.suppress(asyncio.CancelledError):
            await two
        three, _ = await asyncio.gather(invoker.invoke([item(3)]), _release_soon(held.release))

        assert abandoned == []
        assert isinstance((await one)[0], Success)
        assert isinstance(three[0], Success)
        assert held.ran == [1, 3]  # one place: 3 waited for 1, and 2 never ran
    finally:
        held.release.set()
        await invoker.aclose()


async def _release_soon(release: threading.Event) -> None:
    await asyncio.sleep(0)
    release.set()


async def test_a_worker_whose_call_timed_out_turns_the_waiting_calls_away_before_any_starts():
    stuck = threading.Event()
    ran = []

    @actor(name="x", timeout_s=0.05, retry=RetryPolicy(retry_timeouts=False))
    def device(doc):
        ran.append(doc["n"])
        if doc["n"] == 1:
            stuck.wait(BOUND_S)
        return doc

    leaving = []
    invoker = LocalInvoker(spec_of(device), slots=1, on_abandon=lambda: leaving.append(1))
    try:
        outcomes = await asyncio.gather(*(invoker.invoke([item(n)]) for n in (1, 2, 3)))

        assert [o.reason for o in outcomes[0]] == [Reason.TIMEOUT]
        assert outcomes[1:] == [[NotStarted()], [NotStarted()]]  # they go back, to another
        assert ran == [1]
        assert leaving == [1]
        assert await invoker.invoke([item(4)]) == [NotStarted()]  # it is leaving: nothing more
    finally:
        stuck.set()
        await invoker.aclose()


async def test_a_handler_raising_stop_iteration_fails_its_call_instead_of_losing_it():
    @actor(name="x", retry=RetryPolicy(max_attempts=1))
    def device(doc):
        raise StopIteration

    invoker = LocalInvoker(spec_of(device), slots=1)
    try:
        [outcome] = await invoker.invoke([item(1)])
    finally:
        await invoker.aclose()

    assert outcome.reason is Reason.HANDLER_ERROR
    assert "StopIteration" in outcome.message


async def test_a_call_that_came_while_a_thread_failed_to_start_gets_the_place_it_left(
    monkeypatch,
):
    lane = _SyncLane("x", slots=1)
    real_start = threading.Thread.start
    came_meanwhile = []

    def start_failing_once(thread):
        if not came_meanwhile:
            # Another caller submits while this start fails: it finds no free place and waits.
            came_meanwhile.append(lane.submit(lambda: "second"))
            raise RuntimeError("can't start new thread")
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start_failing_once)
    first = lane.submit(lambda: "first")
    [second] = came_meanwhile

    with contextlib.suppress(RuntimeError):
        await first.started
    async with asyncio.timeout(BOUND_S):
        started, value = await second.started, await second.done

    assert first.started.exception() is not None
    assert (started, value) == (True, "second")
    # A caller cancelled about then abandons the call: it never ran, so no place comes free.
    assert lane.abandon(first) is False
    lane.close()
