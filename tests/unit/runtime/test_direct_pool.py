"""DirectCalls against stand-in workers: what a sidecar calling the workers answers when one of
them misbehaves, times out or goes away, and what the runtime is told.

Each stand-in worker is a Unix socket server speaking the frames; how it answers a call is set
per test. The supervisor is a stand-in too: it answers pings (or not) and records retirements.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import msgspec
import pytest

from asya.actor import ActorConfig
from asya.envelope import Envelope, Limits, Reason, Route
from asya.errors import RuntimeUnavailableError
from asya.outcome import Emitted, NotStarted, Success
from asya.runtime.direct import DirectCalls
from asya.runtime.frames import (
    PROTOCOL,
    Call,
    Drain,
    FrameReader,
    Ping,
    Pong,
    Result,
    encode_frame,
    frame_bounds,
)

BOUNDS = frame_bounds(Limits(), None)

Answer = Callable[[Call, asyncio.StreamWriter], Awaitable[None]]


def _pong(timeout_s: float = 30.0) -> Pong:
    actor = ActorConfig(name="a", timeout_s=timeout_s)
    return Pong(0, actor, 1, BOUNDS, PROTOCOL, direct=True, kill_grace_s=0.0)


async def echo(call: Call, writer: asyncio.StreamWriter) -> None:
    outputs = tuple(Emitted(payload=e.payload, next=()) for e in call.envelopes)
    writer.write(encode_frame(Result(call.id, [Success(outputs=outputs)])))


async def garbage(call: Call, writer: asyncio.StreamWriter) -> None:
    del call
    writer.write(b"\x00\x00\x00\x05hello")


async def silent(call: Call, writer: asyncio.StreamWriter) -> None:
    del call, writer


async def hang_up(call: Call, writer: asyncio.StreamWriter) -> None:
    del call
    writer.close()


class Worker:
    """A stand-in worker on `path`: answers Pings, and each Call with `answer`; records the
    Drains it gets."""

    def __init__(self, path: str, answer: Answer, *, pongs: bool = True) -> None:
        self.path = path
        self.answer = answer
        self.pongs = pongs
        self.drains = 0
        self.calls = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=self.path)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameReader(reader)
        try:
            while (frame := await frames.read(BOUNDS.call_bytes)) is not None:
                if isinstance(frame, Ping) and self.pongs:
                    writer.write(encode_frame(msgspec.structs.replace(_pong(), id=frame.id)))
                elif isinstance(frame, Call):
                    self.calls += 1
                    await self.answer(frame, writer)
                elif isinstance(frame, Drain):
                    self.drains += 1
        except ConnectionError:
            pass
        finally:
            writer.close()


class Supervisor:
    """The runtime as DirectCalls sees it: answers pings while `alive`, records retirements."""

    def __init__(self) -> None:
        self.alive = True
        self.retired: list[str] = []
        self.unreachable_told = 0

    async def ping(self) -> Pong:
        if not self.alive:
            raise RuntimeUnavailableError("the runtime closed the connection")
        return _pong()

    def retire(self, worker: str) -> None:
        self.retired.append(worker)

    def unreachable(self) -> None:
        self.unreachable_told += 1


def envelopes(n: int = 1) -> list[Envelope]:
    return [Envelope(id=f"e{i}", route=Route(curr="a"), payload={"n": i}) for i in range(n)]


@pytest.fixture
async def worker_at(tmp_path):
    started: list[Worker] = []

    async def start(answer: Answer, name: str = "w1", *, pongs: bool = True) -> Worker:
        worker = Worker(str(tmp_path / name), answer, pongs=pongs)
        await worker.start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        await worker.stop()


async def _pool(
    supervisor: Supervisor, *paths: str, timeout_s: float = 30.0, depth: int = 1
) -> DirectCalls:
    pool = DirectCalls(_pong(timeout_s), supervisor, depth=depth)
    await pool.join(list(paths))
    return pool


async def test_a_path_that_is_not_a_worker_is_not_joined(tmp_path, worker_at):
    worker = await worker_at(echo)
    pool = await _pool(Supervisor(), str(tmp_path / "nothing-here"), worker.path)
    joined = pool.workers

    [outcome] = await pool.invoke(envelopes())
    await pool.aclose()

    assert joined == 1
    assert isinstance(outcome, Success)
    assert worker.calls == 1


async def test_a_worker_answering_garbage_is_retired_and_its_call_is_a_crash(worker_at):
    worker = await worker_at(garbage)
    supervisor = Supervisor()
    pool = await _pool(supervisor, worker.path)

    [outcome] = await pool.invoke(envelopes())
    await pool.aclose()

    assert outcome.reason is Reason.WORKER_CRASHED
    assert supervisor.retired == [worker.path]


async def test_a_call_cut_while_the_runtime_is_gone_waits_for_it_instead(worker_at):
    worker = await worker_at(hang_up)
    supervisor = Supervisor()
    supervisor.alive = False
    pool = await _pool(supervisor, worker.path)

    with pytest.raises(RuntimeUnavailableError):
        await pool.invoke(envelopes())
    await pool.aclose()


async def test_a_call_past_its_timeout_is_answered_timeout_and_its_worker_retired(worker_at):
    worker = await worker_at(silent)
    supervisor = Supervisor()
    pool = await _pool(supervisor, worker.path, timeout_s=0.05)

    [outcome] = await pool.invoke(envelopes())
    await pool.aclose()

    assert outcome.reason is Reason.TIMEOUT
    assert supervisor.retired == [worker.path]


async def test_a_call_its_worker_never_started_goes_to_another(worker_at):
    # w1 takes two calls (one running, one queued) and hangs up on the second: the first was
    # running (cut: a crash), the second never started and goes to w2.
    async def hang_up_on_the_second(call: Call, writer: asyncio.StreamWriter) -> None:
        if call.id == 2:
            writer.close()

    first = await worker_at(hang_up_on_the_second, "w1")
    supervisor = Supervisor()
    pool = await _pool(supervisor, first.path)
    running = asyncio.create_task(pool.invoke(envelopes()))
    queued = asyncio.create_task(pool.invoke(envelopes()))
    second = await worker_at(echo, "w2")
    await pool.join([second.path])

    [cut] = await running
    [moved] = await queued
    await pool.aclose()

    assert cut.reason is Reason.WORKER_CRASHED
    assert isinstance(moved, Success)
    assert (first.calls, second.calls) == (2, 1)


async def test_when_the_runtime_stops_waiting_calls_go_back_and_later_ones_are_refused(
    worker_at,
):
    # Refused as unavailable: the sidecar's link then holds them for the next runtime.
    worker = await worker_at(silent)
    pool = await _pool(Supervisor(), worker.path, depth=0)
    running = asyncio.create_task(pool.invoke(envelopes()))
    waiting = asyncio.create_task(pool.invoke(envelopes()))
    await asyncio.sleep(0)

    pool.stopping()
    [turned_back] = await waiting
    with pytest.raises(RuntimeUnavailableError):
        await pool.invoke(envelopes())
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    await pool.aclose()

    assert isinstance(turned_back, NotStarted)


async def test_workers_that_cannot_be_reached_are_told_to_the_runtime_once(tmp_path):
    supervisor = Supervisor()
    pool = await _pool(supervisor, str(tmp_path / "gone-1"), str(tmp_path / "gone-2"))

    unreachable = pool.unreachable
    await pool.aclose()

    assert unreachable
    assert supervisor.unreachable_told == 1


async def test_a_worker_whose_loop_does_not_answer_is_retired_not_joined(worker_at):
    worker = await worker_at(echo, pongs=False)
    supervisor = Supervisor()
    pool = await _pool(supervisor, worker.path, timeout_s=0.05)

    joined = pool.workers
    await pool.aclose()

    assert joined == 0
    assert supervisor.retired == [worker.path]
    assert not pool.unreachable  # stuck, not out of reach: its replacement will be joined
