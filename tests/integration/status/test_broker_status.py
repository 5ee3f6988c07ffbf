"""`asya status` on a broker namespace: the management API's counts, else AMQP's ready counts."""

from __future__ import annotations

import asyncio

from asya.cli.status import read_broker, read_queues
from asya.settings import load_settings
from asya.status import Source, management_url_of

CLOSED_PORT_MANAGEMENT = "http://guest:guest@127.0.0.1:1/"


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
    assert report.notes == []
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
    [note] = report.notes
    assert note.startswith("management API not reachable (cannot reach http://guest:***@")
    assert "queued counts by AMQP passive declare for alpha, happy-end, error-end" in note
