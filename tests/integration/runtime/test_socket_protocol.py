"""The runtime as a separate process, spoken to over its Unix socket as the sidecar will.

Each test starts `python -m asya.runtime` on a handler module written for it, and talks to it
with RuntimeClient: one persistent connection, pipelined calls, real worker processes. The
`runtime` fixture runs each test twice: calls through the runtime's socket, and calls to the
workers on their own sockets (`direct`, as the sidecar makes them), which must behave alike.
"""

from __future__ import annotations

import asyncio
import os
import signal
import textwrap

import pytest

from asya.envelope import Limits, Reason
from asya.errors import RuntimeUnavailableError
from asya.outcome import Success
from asya.runtime.client import RuntimeClient
from asya.runtime.frames import frame_bounds
from tests.integration.runtime.processes import (
    call,
    connect,
    start_runtime,
    wait_for_file,
    wait_until_refusing,
)

HANDLERS = textwrap.dedent(
    """
    import os, pathlib, time
    from asya import actor, RetryPolicy

    @actor(timeout_s=1, concurrency=2, retry=RetryPolicy(max_attempts=4))
    def work(doc):
        kind = doc.get("kind")
        if kind == "wait-file":
            if "started" in doc:
                pathlib.Path(doc["started"]).touch()
            while not pathlib.Path(doc["path"]).exists():
                time.sleep(0.01)
        elif kind == "hang":
            time.sleep(600)
        elif kind == "crash":
            os._exit(1)
        elif kind == "raise":
            raise ValueError("bad payload")
        return {"pid": os.getpid(), "n": doc.get("n")}

    INITS = []

    @actor(concurrency=1)
    class Model:
        def __init__(self):
            INITS.append(os.getpid())

        def __call__(self, doc):
            return {"inits": len(INITS)}
    """
)


@pytest.fixture(params=["forwarded", "direct"])
async def runtime(tmp_path, request):
    rt = await start_runtime(tmp_path, HANDLERS, "handlers_mod:work", ASYA_GRACE_S="10")
    client = await connect(rt, direct_depth=1 if request.param == "direct" else None)
    assert (client.direct is not None) is (request.param == "direct")
    yield rt, client
    await client.aclose()
    if rt.process.returncode is None:
        rt.process.terminate()
        await rt.process.wait()


async def test_ping_answers_with_the_actor_as_declared(runtime):
    _, client = runtime

    pong = await client.ping()

    assert (pong.actor.name, pong.actor.timeout_s, pong.actor.retry.max_attempts) == (
        "work",
        1.0,
        4,
    )
    assert pong.capacity == 1


async def test_calls_are_pipelined_on_one_connection_and_answered_in_any_order(runtime, tmp_path):
    _, client = runtime
    started, release = tmp_path / "started", tmp_path / "release"
    slow = asyncio.create_task(
        client.invoke(
            call({"kind": "wait-file", "started": str(started), "path": str(release), "n": 1})
        )
    )
    # The slow call holds its worker before the fast one is sent: it must go to the other.
    await wait_for_file(started)

    [fast] = await client.invoke(call({"n": 2}))
    answered_first = not slow.done()
    release.touch()
    [late] = await slow

    assert answered_first
    assert fast.outputs[0].payload["n"] == 2
    assert late.outputs[0].payload["n"] == 1
    assert fast.outputs[0].payload["pid"] != late.outputs[0].payload["pid"]


async def test_a_handler_error_comes_back_as_a_failure_with_its_traceback(runtime):
    _, client = runtime

    [outcome] = await client.invoke(call({"kind": "raise"}))

    assert (outcome.reason, outcome.type, outcome.message) == (
        Reason.HANDLER_ERROR,
        "builtins.ValueError",
        "bad payload",
    )
    assert "raise ValueError" in outcome.traceback
    assert "asya/handler.py" not in outcome.traceback


async def pids_answering(client: RuntimeClient) -> set[int]:
    """Pids of the workers answering two concurrent calls (one per worker when both are up)."""
    outcomes = await asyncio.gather(*(client.invoke(call({})) for _ in range(2)))
    return {o[0].outputs[0].payload["pid"] for o in outcomes}


async def test_a_stuck_sync_call_times_out_and_its_worker_process_is_replaced(runtime):
    _, client = runtime
    before = await pids_answering(client)

    [outcome] = await client.invoke(call({"kind": "hang"}))
    after = await pids_answering(client)
    for _ in range(100):  # the replacement loads the handler before it takes calls
        if len(after) == 2:
            break
        await asyncio.sleep(0.05)
        after = await pids_answering(client)

    assert outcome.reason is Reason.TIMEOUT
    assert outcome.retryable is True
    assert len(before) == len(after) == 2
    assert len(after - before) == 1


async def test_a_worker_that_dies_mid_call_is_reported_and_replaced(runtime):
    _, client = runtime

    [crashed] = await client.invoke(call({"kind": "crash"}))
    [ok] = await client.invoke(call({"n": 5}))

    assert crashed.reason is Reason.WORKER_CRASHED
    assert crashed.retryable is True
    assert isinstance(ok, Success)


async def test_sigterm_lets_the_call_in_flight_finish_then_exits_cleanly(runtime, tmp_path):
    rt, client = runtime
    started, release = tmp_path / "started", tmp_path / "release"
    in_flight = asyncio.create_task(
        client.invoke(call({"kind": "wait-file", "started": str(started), "path": str(release)}))
    )
    await wait_for_file(started)

    rt.process.send_signal(signal.SIGTERM)
    await wait_until_refusing(rt)
    release.touch()
    [outcome] = await in_flight
    code = await asyncio.wait_for(rt.process.wait(), 10)

    assert isinstance(outcome, Success)
    assert code == 0
    assert not os.path.exists(rt.socket_path)  # noqa: ASYNC240 (a one-off check)


async def test_a_broken_frame_closes_only_that_connection(runtime):
    rt, client = runtime
    reader, writer = await asyncio.open_unix_connection(rt.socket_path)

    writer.write((frame_bounds(Limits(), None).call_bytes + 1).to_bytes(4, "big"))
    await writer.drain()
    closed = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    [outcome] = await client.invoke(call({"n": 1}))

    assert closed == b""
    assert isinstance(outcome, Success)


async def test_a_class_actor_is_initialised_once_per_worker(tmp_path):
    rt = await start_runtime(tmp_path, HANDLERS, "handlers_mod:Model")
    client = await connect(rt)

    outcomes = [(await client.invoke(call({}, "model")))[0] for _ in range(3)]
    await client.aclose()
    rt.process.terminate()
    await rt.process.wait()

    assert [o.outputs[0].payload for o in outcomes] == [{"inits": 1}] * 3


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        ("handlers_mod:missing", "has no attribute 'missing'"),
        ("no_such_module:x", "cannot import handler module 'no_such_module'"),
        ("", "ASYA_HANDLER is not set"),
    ],
)
async def test_a_runtime_that_cannot_load_its_handler_exits_2_saying_why(
    tmp_path, handler, expected
):
    rt = await start_runtime(tmp_path, HANDLERS, handler)

    code = await asyncio.wait_for(rt.process.wait(), 30)

    assert code == 2
    assert expected in await rt.stderr()


async def test_a_lost_runtime_fails_calls_as_unavailable_not_as_envelope_errors(runtime):
    rt, client = runtime
    rt.process.kill()
    await rt.process.wait()

    with pytest.raises(RuntimeUnavailableError):
        await client.invoke(call({"n": 1}))
