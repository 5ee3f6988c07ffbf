"""The memory transport keeps end records the way the broker's streams do."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from asya.errors import TransportError, UnknownActorError
from asya.transport.memory import MemoryTransport
from asya.transport.records import FIRST, RecordKind, Start
from tests.factories import T0, FakeClock


async def _read(store, kind, start=FIRST):
    return [record async for record in store.read(kind, start=start)]


async def test_appended_records_read_back_in_order_with_their_offsets_and_times():
    clock = FakeClock()
    store = MemoryTransport(clock=clock).records

    await store.append(RecordKind.RESULTS, b"one")
    clock.advance(5)
    await store.append(RecordKind.RESULTS, b"two")

    records = await _read(store, RecordKind.RESULTS)
    assert [(r.offset, r.body, r.stored_at) for r in records] == [
        (0, b"one", T0),
        (1, b"two", T0 + timedelta(seconds=5)),
    ]


async def test_each_kind_is_its_own_log():
    store = MemoryTransport().records

    await store.append(RecordKind.FAILURES, b"failed")

    assert await _read(store, RecordKind.RESULTS) == []
    assert [r.body for r in await _read(store, RecordKind.FAILURES)] == [b"failed"]


@pytest.mark.parametrize(
    ("start", "bodies"),
    [(Start(offset=1), [b"b", b"c"]), (Start(since=T0 + timedelta(seconds=2)), [b"c"])],
    ids=["from-an-offset", "since-a-time"],
)
async def test_a_read_starts_at_an_offset_or_a_time(start, bodies):
    clock = FakeClock()
    store = MemoryTransport(clock=clock).records
    for body in (b"a", b"b", b"c"):
        await store.append(RecordKind.RESULTS, body)
        clock.advance(1.5)

    assert [r.body for r in await _read(store, RecordKind.RESULTS, start)] == bodies


async def test_a_read_without_follow_stops_at_the_end_as_of_its_start():
    store = MemoryTransport().records
    await store.append(RecordKind.RESULTS, b"before")

    seen = []
    async for record in store.read(RecordKind.RESULTS):
        seen.append(record.body)
        await store.append(RecordKind.RESULTS, b"during")

    assert seen == [b"before"]


async def test_a_following_read_yields_records_appended_later():
    store = MemoryTransport().records
    reader = store.read(RecordKind.RESULTS, follow=True)
    first = asyncio.ensure_future(anext(reader))

    await store.append(RecordKind.RESULTS, b"later")

    assert (await asyncio.wait_for(first, 5)).body == b"later"
    await reader.aclose()


async def test_resubmit_enqueues_for_the_actor_and_writes_the_ledger():
    transport = MemoryTransport()
    await transport.declare("a")

    await transport.records.resubmit("a", b"again")

    assert (await transport.depth("a")).ready == 1
    assert [r.body for r in await _read(transport.records, RecordKind.REPLAYS)] == [b"again"]


async def test_resubmit_to_an_actor_without_a_queue_records_nothing():
    transport = MemoryTransport()

    with pytest.raises(UnknownActorError):
        await transport.records.resubmit("gone", b"again")

    assert await _read(transport.records, RecordKind.REPLAYS) == []


async def test_a_closed_transport_refuses_appends():
    transport = MemoryTransport()
    await transport.aclose()

    with pytest.raises(TransportError):
        await transport.records.append(RecordKind.RESULTS, b"late")
