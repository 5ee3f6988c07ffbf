"""ChannelAcks against a broker that settles as RabbitMQ does: a `multiple` ack settles every
unsettled delivery up to its tag. Whatever the order of acks and requeues, exactly the acked
deliveries are acked, each once, and no requeued one is ever covered by a multiple ack."""

from __future__ import annotations

import asyncio

import aio_pika
from hypothesis import given, settings
from hypothesis import strategies as st

from asya.transport.rabbitmq_acks import ChannelAcks


class Broker:
    """One channel's unsettled deliveries, settled as the frames say."""

    def __init__(self) -> None:
        self.unsettled: set[int] = set()
        self.acked: list[int] = []
        self.requeued: list[int] = []
        self.frames: list[tuple[str, int, bool]] = []
        self.closed = False
        self.errors: list[str] = []
        """What RabbitMQ would close the channel for (an unknown delivery tag)."""

    async def basic_ack(self, delivery_tag: int, multiple: bool = False) -> None:
        # As aiormq: the frame is queued for writing at once, then the call waits for it to be
        # written, and other tasks run meanwhile.
        if self.closed:
            raise aio_pika.exceptions.ChannelInvalidStateError("closed")
        self.frames.append(("ack", delivery_tag, multiple))
        settled = [t for t in self.unsettled if t <= delivery_tag] if multiple else [delivery_tag]
        for tag in settled:
            if tag not in self.unsettled:
                self.errors.append(f"unknown delivery tag {tag}")
            self.unsettled.discard(tag)
            self.acked.append(tag)
        await written()

    async def basic_nack(self, delivery_tag: int, requeue: bool = True) -> None:
        self.frames.append(("nack", delivery_tag, False))
        if delivery_tag not in self.unsettled:
            self.errors.append(f"unknown delivery tag {delivery_tag}")
        self.unsettled.discard(delivery_tag)
        self.requeued.append(delivery_tag)
        await written()


async def written() -> None:
    """aiormq's wait for a frame to be written: a few loop steps, through its writer task."""
    for _ in range(3):
        await asyncio.sleep(0)


def deliver(broker: Broker, acks: ChannelAcks, count: int) -> None:
    for tag in range(1, count + 1):
        broker.unsettled.add(tag)
        acks.delivered(tag)


def signals_acks(broker: Broker) -> asyncio.Event:
    """An event set once the broker has an ack frame."""
    sent = asyncio.Event()
    ack = broker.basic_ack

    async def basic_ack(delivery_tag: int, multiple: bool = False) -> None:
        await ack(delivery_tag, multiple)
        sent.set()

    broker.basic_ack = basic_ack  # type: ignore[method-assign]
    return sent


async def settle_soon() -> None:
    """Let the flushes scheduled so far run, and what they await."""
    for _ in range(50):
        await asyncio.sleep(0)


async def test_acks_asked_for_together_go_as_one_multiple_ack():
    broker = Broker()
    acks = ChannelAcks(broker, "a")  # type: ignore[arg-type]
    deliver(broker, acks, 5)

    for tag in (3, 1, 5, 2, 4):
        acks.ack(tag)
    await settle_soon()

    assert broker.errors == []
    assert broker.frames == [("ack", 5, True)]
    assert sorted(broker.acked) == [1, 2, 3, 4, 5]


async def test_an_ack_behind_one_still_in_work_goes_alone_and_the_front_run_together():
    broker = Broker()
    acks = ChannelAcks(broker, "a")  # type: ignore[arg-type]
    deliver(broker, acks, 5)

    for tag in (1, 2, 4):
        acks.ack(tag)
    await settle_soon()
    acks.ack(3)
    await settle_soon()

    assert broker.errors == []
    assert broker.frames == [("ack", 2, True), ("ack", 4, False), ("ack", 3, False)]
    assert broker.unsettled == {5}


async def test_a_multiple_ack_never_overtakes_an_ack_still_being_sent():
    broker = Broker()
    acks = ChannelAcks(broker, "a")  # type: ignore[arg-type]
    deliver(broker, acks, 5)

    acks.ack(1)
    acks.ack(3)  # behind 2: an ack of its own, sent after 1's
    await asyncio.sleep(0)  # the flush has sent ack 1 and waits for it to be written
    acks.ack(2)
    acks.ack(4)  # with 1 and 3 taken, 2 and 4 look like a run; 3 is not settled yet
    await settle_soon()

    assert broker.errors == []
    assert sorted(broker.acked) == [1, 2, 3, 4]
    assert broker.unsettled == {5}


async def test_a_requeue_sends_the_acks_before_it_first_and_is_never_covered():
    broker = Broker()
    acks = ChannelAcks(broker, "a")  # type: ignore[arg-type]
    deliver(broker, acks, 4)

    acks.ack(1)
    await acks.nack(2)
    acks.ack(3)
    acks.ack(4)
    await settle_soon()

    assert broker.frames == [("ack", 1, False), ("nack", 2, False), ("ack", 4, True)]
    assert broker.errors == []
    assert (sorted(broker.acked), broker.requeued) == ([1, 3, 4], [2])


async def test_a_requeue_cut_before_its_frame_is_written_is_never_covered_by_a_later_ack():
    broker = Broker()
    acks = ChannelAcks(broker, "a")  # type: ignore[arg-type]
    deliver(broker, acks, 3)
    stuck = asyncio.Event()

    async def nack_stuck(delivery_tag: int, requeue: bool = True) -> None:
        await stuck.wait()  # aiormq's write queue is full: the frame is not queued yet

    broker.basic_nack = nack_stuck  # type: ignore[method-assign]
    requeue = asyncio.create_task(acks.nack(1))
    await asyncio.sleep(0)
    requeue.cancel()  # a drain's grace period ran out
    await asyncio.gather(requeue, return_exceptions=True)
    acks.ack(2)
    acks.ack(3)
    await settle_soon()

    assert broker.errors == []
    assert broker.frames == [("ack", 2, False), ("ack", 3, False)]
    assert broker.unsettled == {1}  # the broker still holds it, and redelivers it


async def test_acks_asked_for_within_the_window_go_as_one_frame_when_flushed():
    broker = Broker()
    acks = ChannelAcks(broker, "a", window_s=3600, hold=10)  # type: ignore[arg-type]
    deliver(broker, acks, 4)

    for tag in (2, 1, 3):  # each in an iteration of its own
        acks.ack(tag)
        await settle_soon()
    held = list(broker.frames)
    await acks.flush()  # as closing the subscription does

    assert held == []
    assert broker.frames == [("ack", 3, True)]
    assert broker.unsettled == {4}


async def test_acks_go_without_waiting_out_the_window_once_hold_of_them_wait():
    broker = Broker()
    acks = ChannelAcks(broker, "a", window_s=3600, hold=3)  # type: ignore[arg-type]
    deliver(broker, acks, 6)

    acks.ack(1)
    acks.ack(2)
    await settle_soon()
    held = list(broker.frames)
    acks.ack(3)
    await settle_soon()
    acks.ack(4)  # the count starts again: this one waits
    await settle_soon()

    assert held == []
    assert broker.frames == [("ack", 3, True)]
    assert broker.unsettled == {4, 5, 6}


async def test_acks_waiting_go_at_once_when_the_consumer_runs_out_of_deliveries():
    broker = Broker()
    acks = ChannelAcks(broker, "a", window_s=3600, hold=10)  # type: ignore[arg-type]
    deliver(broker, acks, 3)

    acks.ack(1)
    acks.ack(2)
    await settle_soon()
    held = list(broker.frames)
    acks.send_waiting()  # as the subscription does when out of deliveries, prefetch full
    await settle_soon()

    assert held == []
    assert broker.frames == [("ack", 2, True)]


async def test_a_flush_cancelled_before_it_ran_leaves_no_ack_behind():
    broker = Broker()
    acks = ChannelAcks(broker, "a")  # type: ignore[arg-type]
    deliver(broker, acks, 2)

    acks.ack(1)
    for task in list(acks._flushes):  # a stop cancelling every task left, this one included
        task.cancel()
    await settle_soon()
    acks.ack(2)
    await settle_soon()

    assert broker.errors == []
    assert sorted(broker.acked) == [1, 2]


async def test_acks_waiting_get_a_window_again_when_their_flush_is_cancelled():
    broker = Broker()
    sent = signals_acks(broker)
    acks = ChannelAcks(broker, "a", window_s=0.001, hold=2)  # type: ignore[arg-type]
    deliver(broker, acks, 3)

    acks.ack(1)
    acks.ack(2)  # the hold: a flush is scheduled, and the window's timer is gone
    for task in list(acks._flushes):
        task.cancel()
    await asyncio.wait_for(sent.wait(), 10)  # no other ack comes: only a new window sends

    assert broker.frames == [("ack", 2, True)]


async def test_the_end_of_the_window_sends_the_acks_waiting():
    broker = Broker()
    sent = signals_acks(broker)
    acks = ChannelAcks(broker, "a", window_s=0.001, hold=10)  # type: ignore[arg-type]
    deliver(broker, acks, 2)

    acks.ack(1)
    await asyncio.wait_for(sent.wait(), 10)  # no flush asked for: only the window's end

    assert broker.frames == [("ack", 1, False)]


async def test_a_requeue_inside_the_window_sends_the_acks_waiting_before_it():
    broker = Broker()
    acks = ChannelAcks(broker, "a", window_s=3600, hold=10)  # type: ignore[arg-type]
    deliver(broker, acks, 3)

    acks.ack(1)
    await acks.nack(2)
    acks.ack(3)
    await settle_soon()
    waiting = list(broker.frames)
    await acks.flush()

    assert waiting == [("ack", 1, False), ("nack", 2, False)]
    assert broker.frames == [("ack", 1, False), ("nack", 2, False), ("ack", 3, False)]
    assert broker.errors == []


async def test_acks_on_a_lost_channel_are_logged_not_raised(caplog):
    broker = Broker()
    acks = ChannelAcks(broker, "a")  # type: ignore[arg-type]
    deliver(broker, acks, 2)
    broker.closed = True

    acks.ack(1)
    acks.ack(2)
    await settle_soon()

    assert broker.acked == []
    assert "acks lost with their channel" in caplog.text


@settings(max_examples=300, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=24),
    window_s=st.sampled_from([0.0, 3600.0]),
    hold=st.integers(min_value=1, max_value=6),
    data=st.data(),
)
def test_any_order_of_settles_acks_exactly_the_acked_and_requeues_exactly_the_requeued(
    count, window_s, hold, data
):
    order = data.draw(st.permutations(range(1, count + 1)))
    requeue = data.draw(st.sets(st.sampled_from(order)))
    # After each settle, let the loop run a few steps, or none: acks asked for in several
    # iterations, flushes that overlap.
    pauses = data.draw(st.lists(st.integers(0, 3), min_size=count, max_size=count))

    async def run() -> Broker:
        broker = Broker()
        # A window that never ends by itself: what it holds goes with a hold, a requeue, or
        # the flush of a closing subscription.
        acks = ChannelAcks(broker, "a", window_s=window_s, hold=hold)  # type: ignore[arg-type]
        deliver(broker, acks, count)
        for tag, pause in zip(order, pauses, strict=True):
            if tag in requeue:
                await acks.nack(tag)
            else:
                acks.ack(tag)
            for _ in range(pause):
                await asyncio.sleep(0)
        await settle_soon()
        while acks._flushes:  # a flush of many single acks takes more than a few steps
            await asyncio.gather(*list(acks._flushes))
        unsent = len(set(order) - requeue) - len(broker.acked)
        # Nothing is left behind without a window; with one, fewer than `hold` wait.
        assert unsent == 0 if window_s == 0 else unsent < hold
        await acks.flush()
        return broker

    broker = asyncio.run(run())

    assert broker.errors == []
    assert sorted(broker.acked) == sorted(set(order) - requeue)
    assert sorted(broker.requeued) == sorted(requeue)
    assert broker.unsettled == set()
    assert len([f for f in broker.frames if f[0] == "ack"]) <= count - len(requeue)
