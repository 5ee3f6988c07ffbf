"""A local run: scale from zero, route, retry, record every final envelope."""

from __future__ import annotations

import random

import pytest

from asya import RetryPolicy, actor
from asya.actor import REGISTRY
from asya.clock import SystemClock
from asya.envelope import Reason
from asya.errors import ActorDefinitionError, SettingsError
from asya.local.discovery import App
from asya.local.mesh import MeshOptions
from asya.local.runner import DevOptions, run_dev


async def run(lines, route=("a",), **mesh_options):
    finals, progress = [], []

    async def emit(envelope):
        finals.append(envelope)

    app = App(specs=tuple(REGISTRY), route=tuple(route), search_path=None)
    result = await run_dev(
        app,
        [line.encode() for line in lines],
        emit=emit,
        progress=progress.append,
        clock=SystemClock(),
        rng=random.Random(3),
        options=DevOptions(
            mesh=MeshOptions(poll_interval_s=0.01, **mesh_options), progress_interval_s=0.05
        ),
    )
    return result, finals, progress


async def test_every_input_reaches_an_end_and_is_counted_per_actor():
    @actor(max_replicas=3, queue_length=2)
    def a(doc):
        return {"n": doc["n"] + 1}

    @actor
    def b(doc):
        if doc["n"] == 3:
            raise ValueError("three")
        return doc

    result, finals, _ = await run([f'{{"n": {n}}}' for n in range(6)], route=("a", "b"))

    assert result.fed == 6
    assert len(finals) == 6
    assert result.stats.succeeded == 5
    assert result.stats.failed_by_reason == {"HandlerError": 1}
    assert result.stats.actors["a"].envelopes == 6
    assert result.stats.actors["b"].failed == 1
    assert result.stats.actors["b"].retried == 2
    assert result.stats.actors["a"].peak_workers == 3


async def test_actors_start_at_zero_workers_and_scale_with_their_queue():
    @actor(max_replicas=4, queue_length=1)
    async def a(doc):
        return doc

    @actor(max_replicas=4)
    def unused(doc):
        return doc

    result, finals, _ = await run(["1"] * 20)

    assert len(finals) == 20
    assert result.stats.actors["a"].peak_workers == 4
    assert result.stats.actors["unused"].peak_workers == 0


async def test_bad_lines_are_recorded_in_error_end_and_good_ones_still_run():
    @actor
    def a(doc):
        return doc

    result, finals, _ = await run(['{"ok": 1}', "{broken", '{"route": ["ghost"], "payload": 1}'])

    reasons = sorted(str(f.status.reason) for f in finals)
    assert reasons == ["MalformedEnvelope", "None", "UnknownActor"]
    assert result.stats.failed == 2


async def test_a_long_run_reports_progress():
    @actor(retry=RetryPolicy(max_attempts=2, base_delay_ms=200, jitter=0))
    def a(doc):
        raise ConnectionError("slow to fail")

    _, _, progress = await run(["1"])

    assert progress
    assert "fed 1/1" in progress[0]


async def test_an_actor_that_cannot_start_stops_the_run_with_the_cause():
    @actor
    class a:  # noqa: N801 (the actor name comes from the class name)
        def __init__(self):
            raise OSError("weights not found")

        def __call__(self, doc):
            return doc

    with pytest.raises(ActorDefinitionError, match="weights not found"):
        await run(["1"])


async def test_timeouts_reach_error_end_and_the_run_still_finishes():
    @actor(timeout_s=0.05, retry=RetryPolicy(max_attempts=1))
    async def a(doc):
        if doc == "hang":
            import asyncio

            await asyncio.sleep(60)
        return doc

    result, finals, _ = await run(['"hang"', '"fine"'])

    assert sorted(str(f.status.reason) for f in finals) == ["None", "Timeout"]
    assert result.stats.failed_by_reason[Reason.TIMEOUT.value] == 1


async def test_bare_payloads_without_any_route_fail_before_any_actor_starts():
    started = []

    @actor
    class a:  # noqa: N801 (the actor name comes from the class name)
        def __init__(self):
            started.append(self)

        def __call__(self, doc):
            return doc

    with pytest.raises(SettingsError, match="input line 2 is a bare payload"):
        await run(['{"route": ["a"], "payload": 1}', '"bare"'], route=())

    assert started == []
