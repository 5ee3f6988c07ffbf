"""`asya serve --health-port` serves the instruments its workers count on at `/metrics`."""

from __future__ import annotations

import asyncio
import random
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from asya import PermanentError, actor
from asya.actor import spec_of
from asya.cli.serve import health_server
from asya.client import Client
from asya.clock import SystemClock
from asya.local.mesh import MeshOptions
from asya.local.serve import ServeOptions, Service
from asya.transport.memory import MemoryTransport


def scrape(port: int) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, sample.labels.get("outcome", "")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.labels.get("actor") == "judge"
    }


async def test_the_outcomes_of_served_calls_are_counted_at_metrics():
    @actor
    def judge(doc):
        if doc == "bad":
            raise PermanentError("no")
        return doc

    transport, stop, serving = MemoryTransport(), asyncio.Event(), asyncio.Event()

    async def connect():
        return transport

    service = Service(
        [spec_of(judge)],
        connect=connect,
        say=lambda line: serving.set() if line.startswith("asya: serving") else None,
        clock=SystemClock(),
        rng=random.Random(0),
        options=ServeOptions(mesh=MeshOptions(poll_interval_s=0.01), ends=True, status_every_s=0),
    )
    health = health_server(service, 0)
    await health.start()
    running = asyncio.create_task(service.run(stop))
    try:
        await asyncio.wait_for(serving.wait(), 10)
        client = Client(transport)
        for doc in ("ok", "fine", "bad"):
            await client.call(["judge"], doc, timeout_s=10)
        counts = await asyncio.to_thread(scrape, health.port)
    finally:
        stop.set()
        await running
        await health.stop()

    assert counts[("asya_envelopes_total", "succeeded")] == 2
    assert counts[("asya_envelopes_total", "failed")] == 1
