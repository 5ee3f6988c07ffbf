"""`asya status` on a broker namespace: the management API's counts, else AMQP's ready counts."""

from __future__ import annotations

import asyncio

import aio_pika

from asya.cli.status import read_broker, read_queues
from asya.queue_names import legacy_queue_name
from asya.settings import load_settings
from asya.status import Source, management_url_of

CLOSED_PORT_MANAGEMENT = "http://guest:guest@127.0.0.1:1/"


def own_notes(report) -> list[str]:
    """The report's notes but the one saying the suite's broker user reaches other tests'
    namespaces (it does: one user for all; tests/integration/tenancy covers that note)."""
    return [n for n in report.notes if "reaches more than" not in n]


async def until_counted(management: str, queue: str, ready: int, timeout_s: float = 30) -> None:
    """The management API's counts trail the broker by its statistics interval: wait for them."""
    async with asyncio.timeout(timeout_s):
        while True:
            counts = (await read_queues(management)).get(queue)
            if counts is not None and counts.ready == ready:
                return
            await asyncio.sleep(0.2)


async def test_the_management_api_gives_each_actor_of_the_namespace_its_queued_and_unacked(
    amqp_url, namespace, actor_names, transport
):
    actor_names.update({"alpha", "beta"})
    for actor in ("alpha", "beta"):
        await transport.declare(actor)
    await transport.publish("alpha", b"one")
    await transport.publish("alpha", b"two")
    management = management_url_of(amqp_url)
    await until_counted(management, f"asya.{namespace}.alpha", 2)

    report = await read_broker(amqp_url, namespace, management, [], load_settings({}))

    assert report.source is Source.BROKER
    assert own_notes(report) == []
    assert [(r.name, r.queued, r.unacked, r.consumers, r.why) for r in report.rows] == [
        ("alpha", 2, 0, 0, "no consumer: 2 waiting"),
        ("beta", 0, 0, 0, "idle: no consumer"),
    ]


async def test_without_the_management_api_the_named_actors_get_ready_counts_and_a_note_says_so(
    amqp_url, namespace, actor_names, transport
):
    actor_names.add("alpha")
    await transport.declare("alpha")
    for body in (b"one", b"two", b"three"):
        await transport.publish("alpha", body)

    report = await read_broker(
        amqp_url, namespace, CLOSED_PORT_MANAGEMENT, ["alpha"], load_settings({})
    )

    assert next((r.name, r.queued, r.unacked) for r in report.rows) == ("alpha", 3, None)
    [note] = own_notes(report)
    assert note.startswith("management API not reachable (cannot reach http://guest:***@")
    assert "queued counts by AMQP passive declare for alpha, happy-end, error-end" in note


async def test_an_old_named_queue_still_holding_messages_is_named_in_a_note(
    amqp_url, namespace, actor_names, transport
):
    # Given: the actor's queue of today's name, idle, and its queue of the old name with 2
    actor_names.add("alpha")
    await transport.declare("alpha")
    old = legacy_queue_name(namespace, "alpha")
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        await channel.declare_queue(old, durable=True)
        for body in (b"one", b"two"):
            await channel.default_exchange.publish(aio_pika.Message(body), routing_key=old)
        management = management_url_of(amqp_url)
        try:
            await until_counted(management, old, 2)

            # When
            report = await read_broker(amqp_url, namespace, management, [], load_settings({}))
        finally:
            await channel.queue_delete(old)

    # Then: the row shows today's idle queue; a note names the old one and what moves it
    assert [(r.name, r.queued) for r in report.rows] == [("alpha", 0)]
    assert own_notes(report) == [
        f"queue {old}, of the old names, holds 2 message(s) that no actor of today's names"
        f" reads: move them with asya migrate-queues --namespace {namespace}"
    ]
