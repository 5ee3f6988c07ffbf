"""The sidecar's runtime link against a runtime stand-in on a real Unix socket."""

from __future__ import annotations

import asyncio

from asya_sidecar.runtime_link import MAX_CUTS, RuntimeLink

from asya import actor
from asya.actor import spec_of
from asya.clock import SystemClock
from asya.envelope import Limits, Reason
from asya.runtime.frames import (
    HANDSHAKE_FRAME_BYTES,
    PROTOCOL,
    Call,
    FrameReader,
    Ping,
    Pong,
    encode_frame,
    frame_bounds,
)
from tests.factories import envelope, rng


class DyingRuntime:
    """Answers pings, and dies (closes the connection) on every call, as an OOM-killed runtime."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.calls = 0
        self._server: asyncio.Server | None = None

        @actor
        def a(doc):
            return doc

        self._info = spec_of(a).config
        self._bounds = frame_bounds(Limits(), None)

    async def __aenter__(self):
        self._server = await asyncio.start_unix_server(self._serve, path=self.path)
        return self

    async def __aexit__(self, *exc):
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader, writer):
        frames = FrameReader(reader)
        while True:
            frame = await frames.read(self._bounds.call_bytes + HANDSHAKE_FRAME_BYTES)
            if isinstance(frame, Ping):
                writer.write(encode_frame(Pong(frame.id, self._info, 1, self._bounds, PROTOCOL)))
                await writer.drain()
            elif isinstance(frame, Call):
                self.calls += 1
                break
            else:
                break
        writer.close()


async def _ignore():
    return None


async def test_a_call_the_runtime_keeps_dying_of_is_failed_as_worker_crashed_not_resent_for_ever(
    tmp_path,
):
    async with DyingRuntime(str(tmp_path / "rt.sock")) as runtime:
        link = RuntimeLink(
            runtime.path,
            wait_s=30,
            clock=SystemClock(),
            rng=rng(),
            on_down=_ignore,
            on_up=_ignore,
        )
        outcomes = await asyncio.wait_for(link.invoke([envelope("a")]), 30)
        await link.aclose()

    [outcome] = outcomes
    assert outcome.reason is Reason.WORKER_CRASHED
    assert outcome.retryable is True
    assert runtime.calls == MAX_CUTS == 3


class RestartingRuntime:
    """Answers pings and keeps each connection; `stop` closes the socket and every connection
    (a runtime restarted), `start` listens again. Counts the connections it accepted."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

        @actor
        def a(doc):
            return doc

        self._info = spec_of(a).config
        self._bounds = frame_bounds(Limits(), None)

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=self.path)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        self._writers.clear()
        await self._server.wait_closed()

    async def _serve(self, reader, writer):
        self.connections += 1
        self._writers.append(writer)
        frames = FrameReader(reader)
        while isinstance(frame := await frames.read(HANDSHAKE_FRAME_BYTES), Ping):
            writer.write(encode_frame(Pong(frame.id, self._info, 1, self._bounds, PROTOCOL)))
            await writer.drain()
        writer.close()


async def test_consuming_resumes_on_a_later_connection_when_the_runtime_left_again_mid_resume(
    tmp_path,
):
    # Down past the wait (consuming paused); back, but gone again before consuming could
    # resume: the connection after that must still resume it, or the actor stops for good.
    runtime = RestartingRuntime(str(tmp_path / "rt.sock"))
    down, first_try, resumed = asyncio.Event(), asyncio.Event(), asyncio.Event()
    doomed = 2  # the first connection after the outage

    async def on_down() -> None:
        down.set()

    async def on_up() -> None:
        if runtime.connections == doomed:
            if not first_try.is_set():
                first_try.set()
                await runtime.stop()
            # Refused on this connection however often it is tried before its end is seen.
            raise RuntimeError("the broker refused the consumer")
        resumed.set()

    await runtime.start()
    link = RuntimeLink(
        runtime.path, wait_s=0.2, clock=SystemClock(), rng=rng(), on_down=on_down, on_up=on_up
    )
    try:
        await asyncio.wait_for(link.ping(), 30)
        await runtime.stop()
        await asyncio.wait_for(down.wait(), 30)
        await runtime.start()
        await asyncio.wait_for(first_try.wait(), 30)
        await runtime.start()

        await asyncio.wait_for(resumed.wait(), 30)
    finally:
        await link.aclose()
        await runtime.stop()

    assert runtime.connections == doomed + 1
