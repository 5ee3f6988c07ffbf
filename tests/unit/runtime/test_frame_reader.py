"""Reading frames a burst at a time: every frame whole and in order, however the bytes arrive;
a frame over its bound, cut short or stalled is refused; the wait between frames is not timed.
Stalls are read on the loop's own clock (looptime), never the wall clock."""

from __future__ import annotations

import asyncio

import looptime
import pytest

from asya.errors import RuntimeProtocolError
from asya.runtime.frames import Drain, FrameReader, Ping, encode_frame

BOUND = 1024


def run(test):
    loop = looptime.new_event_loop(start=0)
    try:
        return loop.run_until_complete(test())
    finally:
        loop.close()


def test_frames_written_in_one_burst_are_read_one_by_one_in_order():
    async def read() -> list[object]:
        reader = asyncio.StreamReader()
        reader.feed_data(b"".join(encode_frame(Ping(n)) for n in range(1, 4)))
        reader.feed_eof()
        frames = FrameReader(reader)
        return [await frames.read(BOUND) for _ in range(4)]

    assert run(read) == [Ping(1), Ping(2), Ping(3), None]


def test_a_frame_arriving_a_byte_at_a_time_is_read_whole():
    async def read() -> list[object]:
        reader = asyncio.StreamReader()
        frames = FrameReader(reader)
        reading = asyncio.create_task(frames.read(BOUND))
        for byte in encode_frame(Drain(9)) + encode_frame(Ping(2))[:3]:
            reader.feed_data(bytes([byte]))
            await asyncio.sleep(0)
        first = await reading
        reader.feed_data(encode_frame(Ping(2))[3:])
        return [first, await frames.read(BOUND)]

    assert run(read) == [Drain(9), Ping(2)]


def test_a_frame_over_its_bound_is_refused_before_its_body_is_read():
    async def read() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data((BOUND + 1).to_bytes(4, "big"))
        await FrameReader(reader).read(BOUND)

    with pytest.raises(RuntimeProtocolError, match=f"over the bound of {BOUND}"):
        run(read)


def test_a_stream_that_ends_inside_a_frame_is_refused():
    async def read() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(encode_frame(Ping(1))[:-1])
        reader.feed_eof()
        await FrameReader(reader).read(BOUND)

    with pytest.raises(RuntimeProtocolError, match="ended inside a frame"):
        run(read)


def test_a_frame_that_stalls_is_refused_after_the_timeout_counted_from_its_first_byte():
    async def read() -> tuple[str, float]:
        reader = asyncio.StreamReader()
        frames = FrameReader(reader, timeout_s=30)
        loop = asyncio.get_running_loop()
        reader.feed_data(encode_frame(Ping(1)) + encode_frame(Ping(2))[:2])
        assert await frames.read(BOUND) == Ping(1)
        with pytest.raises(RuntimeProtocolError) as raised:
            await frames.read(BOUND)
        return str(raised.value), loop.time()

    assert run(read) == ("a frame started but did not arrive whole within 30 s", 30)


def test_the_wait_for_the_next_frame_is_not_timed():
    async def read() -> tuple[object, float]:
        reader = asyncio.StreamReader()
        frames = FrameReader(reader, timeout_s=30)
        loop = asyncio.get_running_loop()
        loop.call_later(3600, reader.feed_data, encode_frame(Ping(5)))
        return await frames.read(BOUND), loop.time()

    assert run(read) == (Ping(5), 3600)
