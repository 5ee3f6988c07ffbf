"""On RabbitMQ, end records live in streams: confirmed appends, exact reads, a clear refusal."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import aio_pika
import pytest

from asya.envelope import END_LIMITS, Reason, decode_envelope, encode_envelope
from asya.errors import SettingsError
from asya.routing import ERROR_END, HAPPY_END, Rejection, plan_rejection
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
from asya.transport.records import RecordKind, Start, records_stream_name
from tests.factories import T0, FakeClock, envelope


async def _read(store, kind, **options):
    return [record async for record in store.read(kind, **options)]


async def test_appended_records_read_back_with_increasing_offsets(transport):
    store = transport.records
    await store.declare(RecordKind.RESULTS)

    for body in (b"one", b"two", b"three"):
        await store.append(RecordKind.RESULTS, body)

    records = await _read(store, RecordKind.RESULTS)
    assert [r.body for r in records] == [b"one", b"two", b"three"]
    assert [r.offset for r in records] == sorted({r.offset for r in records})


async def test_a_read_from_an_offset_skips_what_came_before(transport):
    store = transport.records
    for body in (b"one", b"two", b"three"):
        await store.append(RecordKind.RESULTS, body)
    second = (await _read(store, RecordKind.RESULTS))[1].offset

    records = await _read(store, RecordKind.RESULTS, start=Start(offset=second))

    assert [r.body for r in records] == [b"two", b"three"]


async def test_a_read_since_a_time_skips_older_records(amqp_url, namespace, transport):
    clock = FakeClock()
    async with RabbitMQTransport(
        amqp_url, RabbitMQOptions(namespace=namespace), clock=clock
    ) as own:
        await own.records.append(RecordKind.RESULTS, b"old")
        clock.advance(3600)
        await own.records.append(RecordKind.RESULTS, b"new")

        since = Start(since=T0 + timedelta(minutes=30))
        records = await _read(own.records, RecordKind.RESULTS, start=since)

    assert [r.body for r in records] == [b"new"]


@pytest.mark.parametrize(
    "start",
    [Start(offset=10_000), Start(since=datetime.now(UTC) + timedelta(days=1))],
    ids=["offset", "time"],
)
async def test_a_read_that_starts_past_the_end_is_empty_and_ends(transport, start):
    await transport.records.append(RecordKind.RESULTS, b"one")

    assert await _read(transport.records, RecordKind.RESULTS, start=start) == []


async def test_a_read_of_a_log_never_written_is_empty(transport):
    assert await _read(transport.records, RecordKind.FAILURES) == []


async def test_a_following_read_sees_records_appended_after_it_began(transport):
    store = transport.records
    reader = store.read(RecordKind.RESULTS, follow=True)
    first = asyncio.ensure_future(anext(reader))
    await store.declare(RecordKind.RESULTS)

    await store.append(RecordKind.RESULTS, b"later")

    assert (await asyncio.wait_for(first, 10)).body == b"later"
    await reader.aclose()


async def test_end_actors_keep_results_and_failures_in_their_streams(transport, finals):
    ok = envelope(HAPPY_END, id="ok")
    failed = plan_rejection(
        envelope("a", ("b",), id="bad"), Rejection(Reason.HANDLER_ERROR, "boom"), T0
    ).envelope

    await transport.publish(HAPPY_END, encode_envelope(ok, END_LIMITS))
    await transport.publish(ERROR_END, encode_envelope(failed, END_LIMITS))
    await finals.wait_for(2)

    results = await _read(transport.records, RecordKind.RESULTS)
    failures = await _read(transport.records, RecordKind.FAILURES)
    assert [decode_envelope(r.body, END_LIMITS).id for r in results] == ["ok"]
    assert [decode_envelope(r.body, END_LIMITS).status.reason for r in failures] == [
        Reason.HANDLER_ERROR
    ]


async def test_a_stream_the_broker_cannot_declare_stops_with_the_version_and_the_setting(
    transport, namespace, amqp_url
):
    # A broker without streams refuses x-queue-type=stream; a classic queue already holding
    # the stream's name is refused the same way (PRECONDITION_FAILED) on any broker.
    connection = await aio_pika.connect(amqp_url)
    channel = await connection.channel()
    await channel.declare_queue(records_stream_name(namespace, RecordKind.RESULTS), durable=True)
    await connection.close()

    with pytest.raises(SettingsError) as refused:
        await transport.records.declare(RecordKind.RESULTS)

    message = str(refused.value)
    assert "RabbitMQ 3." in message
    assert "ASYA_RECORDS_MAX_AGE" in message
    assert "3.9 or later" in message
