"""Direct calls: the sidecar calls the runtime's workers on their own sockets, the supervisor out
of the way, and nothing it did for a call is lost.

Each test starts `python -m asya.runtime` with one worker (a sync handler: one call at a time,
one more queued behind it) and connects as the sidecar does. Where a guarantee holds for calls
through the runtime's socket too, the test runs both ways (`way`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import textwrap

import pytest
from asya_sidecar.runtime_link import RuntimeLink

from asya.clock import SystemClock
from asya.envelope import Reason
from asya.errors import RuntimeUnavailableError
from asya.outcome import NotStarted, Success
from asya.runtime.client import RuntimeClient
from asya.runtime.frames import (
    HANDSHAKE_FRAME_BYTES,
    FrameReader,
    Ping,
    Pong,
    Retire,
    encode_frame,
)
from tests.integration.runtime.processes import (
    Runtime,
    call,
    connect,
    start_runtime,
    wait_for_file,
    wait_until_refusing,
)

HANDLERS = textwrap.dedent(
    """
    import os, pathlib, time
    from asya import actor

    def _wait(doc):
        pathlib.Path(doc["started"]).touch()
        while not pathlib.Path(doc["path"]).exists():
            time.sleep(0.01)

    @actor(timeout_s=30, concurrency=1)
    def work(doc):
        kind = doc.get("kind")
        if kind in ("wait-file", "crash-on-file"):
            _wait(doc)
            if kind == "crash-on-file":
                os._exit(1)
        return {"pid": os.getpid(), "n": doc.get("n")}

    @actor(timeout_s=0.5, concurrency=1)
    async def spin(doc):
        if doc.get("kind") == "spin":
            if "started" in doc:
                pathlib.Path(doc["started"]).touch()
            while True:  # never yields: no cancellation reaches it
                pass
        return {"pid": os.getpid()}
    """
)

DIRECT = 1
"""Calls queued behind each running one, as the sidecar's default."""


async def _runtime(tmp_path, handler: str = "work") -> Runtime:
    return await start_runtime(
        tmp_path,
        HANDLERS,
        f"handlers_mod:{handler}",
        ASYA_GRACE_S="10",
        ASYA_RUNTIME_WORKERS="1",
    )


@pytest.fixture
async def pod(tmp_path):
    """A runtime and a client calling its workers directly."""
    rt = await _runtime(tmp_path)
    client = await connect(rt, direct_depth=DIRECT)
    yield rt, client
    await client.aclose()
    await rt.stop()


@pytest.fixture(params=["forwarded", "direct"])
def way(request) -> int | None:
    """The client's `direct_depth`: calls through the runtime's socket, or to the workers."""
    return DIRECT if request.param == "direct" else None


async def _pid(client: RuntimeClient, n: int = 0, actor: str = "work") -> int:
    [outcome] = await client.invoke(call({"n": n}, actor=actor))
    assert isinstance(outcome, Success)
    return outcome.outputs[0].payload["pid"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _until_gone(pid: int, timeout_s: float = 15) -> None:
    async with asyncio.timeout(timeout_s):
        while _alive(pid):  # noqa: ASYNC110 (another process's life)
            await asyncio.sleep(0.02)


def _waiting(tmp_path, name: str, kind: str = "wait-file") -> dict[str, str]:
    return {
        "kind": kind,
        "started": str(tmp_path / f"{name}.started"),
        "path": str(tmp_path / f"{name}.release"),
    }


async def test_calls_are_answered_by_the_workers_while_the_supervisor_is_frozen(pod):
    rt, client = pod
    await _pid(client)  # the worker is joined and answering

    rt.process.send_signal(signal.SIGSTOP)
    try:
        async with asyncio.timeout(10):  # through the frozen supervisor, none would be answered
            pids = [await _pid(client, n) for n in range(20)]
    finally:
        rt.process.send_signal(signal.SIGCONT)

    assert len(pids) == 20
    assert len(set(pids)) == 1


async def test_a_call_queued_behind_a_crash_goes_to_the_replacement_not_failed(tmp_path, way):
    rt = await _runtime(tmp_path)
    client = await connect(rt, direct_depth=way)
    doomed = _waiting(tmp_path, "doomed", "crash-on-file")
    first = asyncio.create_task(client.invoke(call(doomed)))
    await wait_for_file(tmp_path / "doomed.started")
    queued = asyncio.create_task(client.invoke(call({"n": 7})))
    await asyncio.sleep(0)
    await client.ping()  # by now the call was sent on, behind the running one

    (tmp_path / "doomed.release").touch()
    [crashed] = await first
    [then] = await queued
    await client.aclose()
    await rt.stop()

    assert crashed.reason is Reason.WORKER_CRASHED
    assert isinstance(then, Success)
    assert then.outputs[0].payload["n"] == 7


async def test_sigterm_turns_back_the_queued_call_and_lets_the_running_one_finish(tmp_path, way):
    rt = await _runtime(tmp_path)
    client = await connect(rt, direct_depth=way)
    running = asyncio.create_task(client.invoke(call(_waiting(tmp_path, "running"))))
    await wait_for_file(tmp_path / "running.started")
    queued = asyncio.create_task(client.invoke(call({"n": 2})))
    await asyncio.sleep(0)
    # Through the runtime's socket: it handles one connection's frames in order, so once it
    # answers this, the call was passed on to the worker, where the runtime's Drain follows
    # it. Directly: the call is on the worker's connection, where the Drain this client sends
    # when the runtime says it is stopping follows it.
    await client.ping()

    rt.process.send_signal(signal.SIGTERM)
    [turned_back] = await queued
    (tmp_path / "running.release").touch()
    [finished] = await running
    code = await asyncio.wait_for(rt.process.wait(), 20)
    await client.aclose()

    assert isinstance(turned_back, NotStarted)
    assert isinstance(finished, Success)
    assert code == 0


async def test_a_runtime_killed_mid_call_leaves_the_call_waiting_not_failed(tmp_path, way):
    rt = await _runtime(tmp_path)
    client = await connect(rt, direct_depth=way)
    worker = await _pid(client)
    running = asyncio.create_task(client.invoke(call(_waiting(tmp_path, "running"))))
    await wait_for_file(tmp_path / "running.started")

    rt.process.kill()
    with pytest.raises(RuntimeUnavailableError):
        await running
    await _until_gone(worker)  # it died with its supervisor
    await client.aclose()


async def _left_spinning(tmp_path, rt: Runtime) -> int:
    """A direct caller starts a call that holds its worker's loop, and goes away; the pid."""
    client = await connect(rt, direct_depth=DIRECT)
    pid = await _pid(client, actor="spin")
    spinning = asyncio.create_task(
        client.invoke(call({"kind": "spin", "started": str(tmp_path / "spin")}, actor="spin"))
    )
    await wait_for_file(tmp_path / "spin")
    await client.aclose()
    with contextlib.suppress(RuntimeUnavailableError):
        await spinning
    return pid


async def test_a_worker_left_stuck_by_a_caller_that_went_away_is_killed(tmp_path):
    rt = await _runtime(tmp_path, "spin")
    stuck = await _left_spinning(tmp_path, rt)

    # No sidecar comes back: after the call's timeout and kill grace, the runtime pings its
    # workers and kills the one that does not answer.
    await _until_gone(stuck)
    client = await connect(rt, direct_depth=DIRECT)
    replacement = await _pid(client, actor="spin")
    await client.aclose()
    await rt.stop()

    assert replacement != stuck


async def test_a_sidecar_that_comes_back_retires_the_worker_left_stuck(tmp_path):
    rt = await _runtime(tmp_path, "spin")
    stuck = await _left_spinning(tmp_path, rt)

    # A sidecar is back at once: the stuck worker never answers its ping, and is retired.
    client = await connect(rt, direct_depth=DIRECT)
    replacement = await _pid(client, actor="spin")
    direct = client.direct
    await client.aclose()
    await rt.stop()

    assert replacement != stuck
    assert not _alive(stuck)
    assert direct is not None


async def test_a_caller_through_the_runtimes_socket_leaves_the_workers_alone(tmp_path):
    rt = await _runtime(tmp_path)
    client = await connect(rt)
    before = await _pid(client)

    await client.aclose()
    client = await connect(rt)
    after = await _pid(client)
    await client.aclose()
    await rt.stop()

    assert after == before


async def test_a_retire_naming_no_worker_kills_none(pod):
    rt, client = pod
    before = await _pid(client)
    reader, writer = await asyncio.open_unix_connection(rt.socket_path)

    for name in ("/etc/passwd", "", rt.socket_path, f"{rt.socket_path}.w99"):
        writer.write(encode_frame(Retire(0, name)))
    writer.write(encode_frame(Ping(5)))
    await writer.drain()
    # One connection's frames are handled in order: the Retires were, once the Pong comes.
    pong = await FrameReader(reader).read(HANDSHAKE_FRAME_BYTES)
    writer.close()
    after = await _pid(client)

    assert isinstance(pong, Pong)
    assert after == before
    assert _alive(before)


async def test_a_busy_loop_past_its_timeout_is_answered_timeout_and_its_worker_killed(
    tmp_path, way
):
    rt = await _runtime(tmp_path, "spin")
    client = await connect(rt, direct_depth=way)
    stuck = await _pid(client)

    [outcome] = await client.invoke(call({"kind": "spin"}, actor="spin"))
    await _until_gone(stuck)
    replacement = await _pid(client)
    await client.aclose()
    await rt.stop()

    assert outcome.reason is Reason.TIMEOUT
    assert replacement != stuck


async def _ignore() -> None:
    return None


async def test_through_the_sidecars_link_sigterm_finishes_the_running_call_and_holds_new_ones(
    tmp_path,
):
    # The runtime holds the link's connection open until its workers are done, so the running
    # call's answer arrives (not cut, so not sent again to run twice); a call made while it
    # stops is neither failed nor lost: it waits, and the next runtime answers it.
    rt = await _runtime(tmp_path)
    link = RuntimeLink(
        rt.socket_path,
        wait_s=30,
        clock=SystemClock(),
        rng=random.Random(1),
        on_down=_ignore,
        on_up=_ignore,
        direct_depth=DIRECT,
    )
    running = asyncio.create_task(link.invoke(call(_waiting(tmp_path, "running"))))
    await wait_for_file(tmp_path / "running.started")
    client = link._client  # the link's connection, to see the direct calls in use

    rt.process.send_signal(signal.SIGTERM)
    async with asyncio.timeout(15):
        while client is not None and client.connected:  # noqa: ASYNC110 (until the Drain)
            await asyncio.sleep(0.01)
    # The runtime said it is stopping: a call now is not sent to it (a call sent just before
    # would be turned back, NotStarted, by the drain that follows it to the worker).
    held = asyncio.create_task(link.invoke(call({"n": 9})))
    (tmp_path / "running.release").touch()
    [finished] = await asyncio.wait_for(running, 20)
    code = await asyncio.wait_for(rt.process.wait(), 20)
    waited = not held.done()
    next_runtime = await _runtime(tmp_path)
    [later] = await asyncio.wait_for(held, 30)
    await link.aclose()
    await next_runtime.stop()

    assert client is not None
    assert client.direct is not None
    assert isinstance(finished, Success)
    assert code == 0
    assert waited
    assert isinstance(later, Success)
    assert later.outputs[0].payload["n"] == 9


async def test_a_sidecar_that_cannot_reach_the_workers_calls_through_the_runtime(tmp_path):
    rt = await _runtime(tmp_path)
    probe = await connect(rt)  # once it answers, its workers listen
    await probe.aclose()
    for worker_socket in tmp_path.glob("rt.sock.w*"):
        worker_socket.unlink()  # as if the sidecar saw another directory

    client = await connect(rt, direct_depth=DIRECT)
    running = asyncio.create_task(client.invoke(call(_waiting(tmp_path, "running"))))
    await wait_for_file(tmp_path / "running.started")
    # It told the runtime, which treats it as any caller of its socket: a SIGTERM lets the
    # running call finish within the grace period.
    rt.process.send_signal(signal.SIGTERM)
    await wait_until_refusing(rt)
    (tmp_path / "running.release").touch()
    [finished] = await running
    await client.aclose()
    await rt.stop()

    assert client.direct is None
    assert isinstance(finished, Success)


async def test_a_socket_path_too_long_for_the_workers_turns_direct_calls_off(tmp_path):
    # The runtime's socket fits a Unix socket path; the workers' (`.w` and digits) would not.
    folder = tmp_path / ("d" * (100 - len(str(tmp_path)) - len("/") - len("/rt.sock")))
    folder.mkdir()
    socket_path = str(folder / "rt.sock")
    assert len(socket_path) == 100
    rt = await start_runtime(
        tmp_path, HANDLERS, "handlers_mod:work", socket_path=socket_path, ASYA_GRACE_S="10"
    )

    client = await connect(rt, direct_depth=DIRECT)
    await _pid(client)  # answered, through the runtime's socket
    await client.aclose()
    await rt.stop()

    assert client.direct is None
    assert "the workers' socket paths would be too long" in await rt.stderr()
