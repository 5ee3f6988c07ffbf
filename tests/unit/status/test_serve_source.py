"""`asya status --from`: a running `asya serve`'s `GET /status`, read over HTTP.

The service runs in-process on the memory transport, with the health server `asya serve`
starts; `read_serve` is what `asya status --from URL` calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import random

import pytest

from asya import actor
from asya.actor import spec_of
from asya.cli.status import read_serve
from asya.client import Client
from asya.clock import SystemClock
from asya.errors import SettingsError
from asya.health import HealthServer
from asya.local.mesh import MeshOptions
from asya.local.serve import ServeOptions, Service
from asya.status import Row, Source
from asya.transport.memory import MemoryTransport
from tests.factories import envelope


@contextlib.asynccontextmanager
async def served(specs, *, ends):
    """The service running with its /status on a free port; stopped and drained after."""
    transport, stop, serving = MemoryTransport(), asyncio.Event(), asyncio.Event()

    def say(line):
        if line.startswith("asya: serving"):
            serving.set()

    async def connect():
        return transport

    service = Service(
        specs,
        connect=connect,
        say=say,
        clock=SystemClock(),
        rng=random.Random(0),
        options=ServeOptions(
            mesh=MeshOptions(poll_interval_s=0.01, grace_s=30), ends=ends, status_every_s=0
        ),
    )
    health = HealthServer(
        0, live=service.is_live, ready=service.is_ready, status=service.status_json
    )
    await health.start()
    running = asyncio.create_task(service.run(stop))
    try:
        await asyncio.wait_for(serving.wait(), 10)
        yield transport, f"http://127.0.0.1:{health.port}"
    finally:
        stop.set()
        await running
        await health.stop()


async def test_a_call_in_flight_shows_as_in_flight_on_its_actors_row():
    release, started = asyncio.Event(), asyncio.Event()

    @actor
    async def slow(doc):
        started.set()
        await release.wait()
        return doc

    async with served([spec_of(slow)], ends=False) as (transport, url):
        await Client(transport).publish(envelope("slow", id="e1"))
        await asyncio.wait_for(started.wait(), 10)

        report = await read_serve(url)
        release.set()

    assert report.source is Source.SERVE
    assert report.rows == [
        Row(name="slow", queued=0, in_flight=1, desired=1, ready=1, processed=0, failed=0)
    ]


async def test_finished_calls_are_counted_and_the_end_actors_have_rows_too():
    @actor
    def shout(doc):
        return doc.upper()

    async with served([spec_of(shout)], ends=True) as (transport, url):
        await Client(transport).call(["shout"], "hi", timeout_s=10)

        report = await read_serve(url)

    assert [(r.name, r.processed, r.failed) for r in report.rows] == [
        ("shout", 1, 0),
        ("happy-end", 0, 0),
        ("error-end", 0, 0),
    ]
    assert report.notes == ["finals: 1 succeeded, 0 failed (in this process)"]


async def test_a_url_where_no_asya_serve_answers_is_an_error_naming_it():
    health = HealthServer(0, live=lambda: True, ready=lambda: True)
    await health.start()
    url = f"http://127.0.0.1:{health.port}"
    try:
        with pytest.raises(
            SettingsError, match=r"cannot read the status of asya serve at .*/status"
        ):
            await read_serve(url)
    finally:
        await health.stop()
