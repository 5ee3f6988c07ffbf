"""Chaos: a runtime outage far longer than the queue's delivery limit allows for loses nothing.

On quorum queues every requeue counts as a delivery. A sidecar that gave its envelopes back each
time its runtime stayed unreachable for ASYA_RUNTIME_WAIT_S would see them dead-lettered to
error-end as DeliveryLimitExceeded once the outage outlasted ASYA_RUNTIME_WAIT_S x
ASYA_DELIVERY_LIMIT. The sidecar holds them instead, steps away from the queue, and sends them
again once the runtime is back.
"""

from __future__ import annotations

import asyncio
import random
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from asya import Client
from asya.clock import SystemClock
from asya.crew.ends import EndActor
from asya.envelope import Phase
from asya.routing import ERROR_END, HAPPY_END
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
from tests.broker import Cluster
from tests.fixtures_broker import Finals

HANDLERS = """
import pathlib, time
from asya import actor

@actor(concurrency=2)
def hold(doc):
    pathlib.Path(doc["marks"], str(doc["n"])).touch()
    while not pathlib.Path(doc["release"]).exists():
        time.sleep(0.01)
    return doc
"""

WAIT_S = 0.5
DELIVERY_LIMIT = 2
ENVELOPES = 10
IN_FLIGHT = 2
"""The actor's concurrency: envelopes running in the runtime when it is killed."""
HELD = IN_FLIGHT * (2 + 1)
"""What the sidecar holds (its prefetch at the default ASYA_PIPELINE_DEPTH of 1: the calls
running, one queued behind each, one finishing each); the rest stay queued."""


@pytest.fixture
async def limited(request, amqp_url, namespace):
    """A connection declaring queues as the pod's sidecar does: a delivery limit of 2."""
    options = RabbitMQOptions(
        namespace=namespace,
        delivery_limit=DELIVERY_LIMIT,
        connection_name=request.node.name[:100],
    )
    opened = RabbitMQTransport(amqp_url, options)
    await opened.connect()
    yield opened
    await opened.delete_queues({"hold", HAPPY_END, ERROR_END})
    await opened.aclose()


@pytest.fixture
async def limited_finals(limited):
    record = Finals()
    ends = [
        EndActor(name, transport=limited, sink=record, clock=SystemClock(), rng=random.Random())
        for name in (HAPPY_END, ERROR_END)
    ]
    for end in ends:
        await limited.declare(end.name)
        await end.start()
    yield record
    for end in ends:
        await end.stop(1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def readiness(port: int) -> int | None:
    """The status /readyz answers, or None while nothing listens."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return None
    writer.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
    status = int((await reader.read()).split(b" ", 2)[1])
    writer.close()
    return status


async def messages_ready(transport: RabbitMQTransport, actor: str) -> int:
    """Messages waiting in an actor's queue (not held by a consumer), as the broker counts."""
    channel = await transport.open_channel()
    try:
        # The robust channel caches what it declared: ask the broker itself.
        underlay = await channel.get_underlay_channel()
        declared = await underlay.queue_declare(transport.queue_for(actor), passive=True)
        return declared.message_count or 0
    finally:
        await channel.close()


async def eventually(check: Callable[[], Awaitable[bool]], timeout_s: float = 30) -> None:
    async with asyncio.timeout(timeout_s):
        while not await check():  # noqa: ASYNC110 (polling another process)
            await asyncio.sleep(0.05)


async def test_a_runtime_outage_longer_than_the_delivery_limit_allows_loses_nothing(
    amqp_url, namespace, tmp_path, limited, limited_finals
):
    await limited.declare("hold")
    port = free_port()
    marks, release = tmp_path / "marks", tmp_path / "release"
    marks.mkdir()
    cluster = Cluster(amqp_url, namespace, tmp_path, HANDLERS)
    pod = cluster.pod(
        "hold",
        "handlers_it:hold",
        ASYA_RUNTIME_WAIT_S=str(WAIT_S),
        ASYA_DELIVERY_LIMIT=str(DELIVERY_LIMIT),
        ASYA_HEALTH_PORT=str(port),
    )
    await pod.start()
    try:
        await eventually(lambda: _is(readiness(port), 200))
        client = Client(limited)
        payload = {"marks": str(marks), "release": str(release)}
        sent = {await client.send(["hold"], {**payload, "n": n}) for n in range(ENVELOPES)}
        await eventually(lambda: _has_files(marks, IN_FLIGHT))

        pod.runtime.send_signal(signal.SIGKILL)
        await pod.runtime.wait()
        # Past ASYA_RUNTIME_WAIT_S the sidecar says it is not ready; it keeps the envelopes it
        # holds unacked, and the rest stay queued.
        await eventually(lambda: _is(readiness(port), 503))
        await eventually(lambda: _is(messages_ready(limited, "hold"), ENVELOPES - HELD))
        outage = await hold_outage(port, limited_finals, WAIT_S * DELIVERY_LIMIT * 3)
        await pod.start_runtime()
        release.touch()
        await limited_finals.wait_until(lambda: sent <= set(limited_finals.by_id()), 60)
        ready_again = await readiness(port)
    finally:
        await cluster.stop()
        print(cluster.logs())  # shown when the test fails

    assert outage == {"not ready": True, "finals": 0}
    assert {e.id for e in limited_finals.envelopes} == sent
    assert {e.status.phase for e in limited_finals.envelopes} == {Phase.SUCCEEDED}
    assert ready_again == 200


async def hold_outage(port: int, finals: Finals, outage_s: float) -> dict[str, object]:
    """Keep the runtime down until the outage has lasted `outage_s` by this test's clock.

    The length of the outage is what is under test (old sidecars dead-lettered envelopes after
    ASYA_RUNTIME_WAIT_S x ASYA_DELIVERY_LIMIT), so it is measured, probing all along that the
    sidecar stays not ready and nothing reaches an end.
    """
    not_ready = True
    deadline = time.monotonic() + outage_s
    while time.monotonic() < deadline:
        not_ready = not_ready and await readiness(port) == 503
        await asyncio.sleep(0.1)
    return {"not ready": not_ready, "finals": len(finals.envelopes)}


async def _is(value: Awaitable[object], expected: object) -> bool:
    return await value == expected


async def _has_files(directory: Path, count: int) -> bool:
    return len(list(directory.iterdir())) >= count  # noqa: ASYNC240 (files of another process)
