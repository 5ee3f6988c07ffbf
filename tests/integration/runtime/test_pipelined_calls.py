"""Calls queued at a worker behind the one it runs: never lost, never run twice.

A worker process takes its next call while it runs one (`ProcessInvoker(depth=1)`), so the
call is ready the moment the running one returns. These tests hold the running call on a file,
queue a second behind it, and then drain the invoker or crash the worker: the queued call must
come back untouched (drain) or run once on the replacement (crash). Every call the handler
starts is written to a log file, which is what the assertions count.
"""

from __future__ import annotations

import asyncio
import os
import random
import textwrap
from pathlib import Path

import pytest

from asya.actor import ActorConfig
from asya.clock import SystemClock
from asya.envelope import Limits, Reason, decode_envelope, encode_envelope
from asya.hooks import Hooks, StepResult
from asya.outcome import Failure, NotStarted, Success
from asya.routing import ERROR_END, HAPPY_END
from asya.runtime.workers import ProcessInvoker
from asya.transport.base import QueueDepth
from asya.transport.memory import MemoryTransport
from tests.factories import Replica, envelope

HANDLERS = """
    import os
    import time
    from pathlib import Path

    from asya import actor

    HERE = Path(os.environ["PIPELINE_DIR"])


    @actor(timeout_s=60)
    def step(doc):
        with open(HERE / "started", "a") as log:
            log.write(f"{doc['n']}\\n")
        while doc.get("hold") and not (HERE / "go").exists():
            time.sleep(0.005)
        if doc.get("crash"):
            os._exit(1)
        return doc
"""


@pytest.fixture
async def invoker(tmp_path):
    (tmp_path / "pipeline_handlers.py").write_text(textwrap.dedent(HANDLERS))
    env = {
        **os.environ,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "PIPELINE_DIR": str(tmp_path),
    }
    invoker = ProcessInvoker("pipeline_handlers:step", env=env, depth=1)
    await invoker.start()
    yield invoker
    await invoker.aclose()


def started(tmp_path: Path) -> list[int]:
    log = tmp_path / "started"
    return [int(n) for n in log.read_text().split()] if log.exists() else []


async def until(condition, timeout_s: float = 30) -> None:
    """Poll `condition` (state this test can see) until it holds; a bound, not a timing."""
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 (state of other processes and tasks)
            await asyncio.sleep(0.005)


async def a_call_running_and_one_queued(invoker, tmp_path, first: dict):
    running = asyncio.create_task(invoker.invoke([envelope("a", id="e0", payload=first)]))
    await until(lambda: started(tmp_path) == [0])
    queued = asyncio.create_task(invoker.invoke([envelope("a", id="e1", payload={"n": 1})]))
    await until(lambda: invoker.held == 2)  # both at the worker: one running, one behind it
    return running, queued


async def test_a_drain_turns_the_queued_call_away_untouched_and_lets_the_running_one_finish(
    invoker, tmp_path
):
    running, queued = await a_call_running_and_one_queued(invoker, tmp_path, {"n": 0, "hold": 1})

    invoker.drain()
    turned_away = await asyncio.wait_for(queued, 30)
    still_running = not running.done()
    (tmp_path / "go").write_text("")
    finished = await asyncio.wait_for(running, 30)

    assert turned_away == [NotStarted()]
    assert still_running
    assert isinstance(finished[0], Success)
    assert started(tmp_path) == [0]  # the queued call never ran
    [later] = await invoker.invoke([envelope("a", payload={"n": 2})])
    assert isinstance(later, Success)  # a drain turns away what it held, not what comes after


async def test_a_worker_crash_fails_the_running_call_and_the_queued_one_runs_once_elsewhere(
    invoker, tmp_path
):
    running, queued = await a_call_running_and_one_queued(
        invoker, tmp_path, {"n": 0, "hold": 1, "crash": 1}
    )

    (tmp_path / "go").write_text("")
    crashed = await asyncio.wait_for(running, 30)
    moved = await asyncio.wait_for(queued, 60)

    assert isinstance(crashed[0], Failure)
    assert crashed[0].reason is Reason.WORKER_CRASHED
    assert isinstance(moved[0], Success)
    assert moved[0].outputs[0].payload == {"n": 1}
    assert started(tmp_path) == [0, 1]  # the queued call ran once, on the replacement


class Steps(Hooks):
    def __init__(self):
        self.results = []

    def stepped(self, actor, result, reason, duration_s, outputs):
        self.results.append(result)


async def test_a_consumer_that_drains_gives_the_queued_message_back_to_its_queue(invoker, tmp_path):
    transport = MemoryTransport()
    for name in ("a", HAPPY_END, ERROR_END):
        await transport.declare(name)
    steps = Steps()
    consumer = Replica(
        ActorConfig(name="a"),
        transport=transport,
        invoker=invoker,
        limits=Limits(),
        clock=SystemClock(),
        rng=random.Random(1),
        hooks=steps,
        depth=1,
    )
    for n, payload in enumerate(({"n": 0, "hold": 1}, {"n": 1})):
        await transport.publish(
            "a", encode_envelope(envelope("a", id=f"e{n}", payload=payload), Limits())
        )
    await consumer.start()
    await until(lambda: invoker.held == 2)

    stopping = asyncio.create_task(consumer.stop(30))
    await until_async(lambda: transport.depth("a"), lambda d: d.ready == 1)
    (tmp_path / "go").write_text("")
    await asyncio.wait_for(stopping, 30)

    assert started(tmp_path) == [0]
    assert steps.results == [StepResult.SUCCEEDED]
    assert (await transport.depth("a")) == QueueDepth(ready=1, unacked=0)
    assert (await transport.depth(HAPPY_END)).ready == 1
    subscription = await transport.subscribe("a", prefetch=1)
    back = await subscription.get()
    assert back is not None
    assert decode_envelope(back.body, Limits()).id == "e1"
    await subscription.close()


async def until_async(read, condition, timeout_s: float = 30) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition(await read()):  # noqa: ASYNC110 (state of another task)
            await asyncio.sleep(0.005)
