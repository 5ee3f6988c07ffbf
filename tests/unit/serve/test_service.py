"""`asya serve`'s service on the in-memory transport: what it serves, how it stops, its status."""

from __future__ import annotations

import asyncio
import random

import pytest

from asya import actor
from asya.actor import spec_of
from asya.client import Client
from asya.clock import SystemClock
from asya.envelope import END_LIMITS, Phase, decode_envelope
from asya.errors import SettingsError, TransportError
from asya.hooks import StepResult
from asya.local.mesh import MeshOptions
from asya.local.serve import (
    ServeOptions,
    ServeState,
    ServeStats,
    Service,
    format_status,
    select_actors,
)
from asya.routing import HAPPY_END
from asya.transport.memory import MemoryTransport
from tests.factories import envelope


class Said:
    """The service's lines, and a wait for one that starts with a given text."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._changed = asyncio.Event()

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, start: str, timeout_s: float = 10) -> None:
        async with asyncio.timeout(timeout_s):
            while not any(line.startswith(start) for line in self.lines):
                await self._changed.wait()


def make_service(transport, specs, said, *, ends=True):
    async def connect():
        return transport

    return Service(
        specs,
        connect=connect,
        say=said,
        clock=SystemClock(),
        rng=random.Random(0),
        options=ServeOptions(
            mesh=MeshOptions(poll_interval_s=0.01, grace_s=30), ends=ends, status_every_s=0
        ),
    )


async def first_message(transport, actor, timeout_s=10):
    subscription = await transport.subscribe(actor, prefetch=1)
    try:
        async with asyncio.timeout(timeout_s):
            return await subscription.get()
    finally:
        await subscription.close()


def test_select_actors_refuses_an_unknown_name_and_names_the_closest():
    @actor
    def shout(doc):
        return doc

    @actor
    def split(doc):
        return doc

    with pytest.raises(SettingsError, match=r"--actors names 'shuot'.*did you mean 'shout'"):
        select_actors([spec_of(shout), spec_of(split)], ["shuot"])


def test_select_actors_keeps_only_the_named_actors_in_the_apps_order():
    @actor
    def a(doc):
        return doc

    @actor
    def b(doc):
        return doc

    @actor
    def c(doc):
        return doc

    selected = select_actors([spec_of(a), spec_of(b), spec_of(c)], ["c", "a"])

    assert [s.name for s in selected] == ["a", "c"]


def test_the_status_line_shows_workers_depth_and_counts_per_actor_and_the_finals():
    stats = ServeStats(["split", "shout"])
    stats.on_workers("split", 2)
    stats.stepped("split", StepResult.SUCCEEDED, "", 0.1, 3)
    stats.stepped("split", StepResult.FAILED, "", 0.1, 1)
    stats.finals[Phase.SUCCEEDED] += 3
    stats.finals[Phase.FAILED] += 1

    line = format_status(stats, {"split": 14, "shout": None}, ends=True)

    assert line == (
        "asya: split workers=2 depth=14 processed=2 failed=1"
        " | shout workers=0 depth=? processed=0 failed=0"
        " | finals succeeded=3 failed=1"
    )


async def test_a_call_in_flight_when_told_to_stop_finishes_and_its_output_is_published():
    release = asyncio.Event()
    started = asyncio.Event()

    @actor
    async def slow(doc):
        started.set()
        await release.wait()
        return doc

    transport, said, stop = MemoryTransport(), Said(), asyncio.Event()
    service = make_service(transport, [spec_of(slow)], said, ends=False)
    running = asyncio.create_task(service.run(stop))
    await said.wait_for("asya: serving slow")
    await Client(transport).publish(envelope("slow", id="e1"))
    await started.wait()
    was_ready = service.is_ready()

    stop.set()
    await said.wait_for("asya: stopping")
    release.set()
    await running

    assert was_ready
    assert decode_envelope((await first_message(transport, HAPPY_END)).body, END_LIMITS).id == "e1"
    assert (await transport.depth("slow")).total == 0
    assert (service.state, service.is_live(), service.is_ready()) == (
        ServeState.STOPPED,
        False,
        False,
    )


async def test_without_ends_the_service_leaves_final_envelopes_for_another_process():
    @actor
    def echo(doc):
        return doc

    transport, said, stop = MemoryTransport(), Said(), asyncio.Event()
    service = make_service(transport, [spec_of(echo)], said, ends=False)
    running = asyncio.create_task(service.run(stop))
    await said.wait_for("asya: serving echo")

    await Client(transport).publish(envelope("echo", id="e1"))
    final = await first_message(transport, HAPPY_END)
    stop.set()
    await running

    assert decode_envelope(final.body, END_LIMITS).id == "e1"
    assert said.lines[0] == "asya: serving echo"
    assert sum(service.stats.finals.values()) == 0


async def test_with_ends_the_service_answers_a_client_waiting_for_the_final_envelope():
    @actor
    def shout(doc):
        return doc.upper()

    transport, said, stop = MemoryTransport(), Said(), asyncio.Event()
    service = make_service(transport, [spec_of(shout)], said)
    running = asyncio.create_task(service.run(stop))
    await said.wait_for("asya: serving shout and the end actors")

    final = (await Client(transport).call(["shout"], "hi", timeout_s=10)).one()
    stop.set()
    await running

    assert (final.payload, final.status.phase) == ("HI", Phase.SUCCEEDED)
    assert service.stats.finals == {Phase.SUCCEEDED: 1}


async def test_stopped_while_the_broker_is_unreachable_the_service_returns_without_serving():
    attempts = []
    lines = []
    stop = asyncio.Event()

    async def unreachable():
        attempts.append(1)
        stop.set()
        raise TransportError("cannot reach the broker at amqp://nowhere")

    service = Service(
        [],
        connect=unreachable,
        say=lines.append,
        clock=SystemClock(),
        rng=random.Random(0),
    )

    await service.run(stop)

    assert len(attempts) == 1
    assert len(lines) == 1
    assert lines[0].startswith("asya: cannot reach the broker at amqp://nowhere; retrying in ")
    assert service.state is ServeState.STOPPED
