"""FrameWriter: frames sent in one loop iteration leave in one write, in order, and none is
dropped by closing."""

from __future__ import annotations

import asyncio

from asya.runtime.frames import FrameWriter


class Stream:
    """The part of a StreamWriter FrameWriter uses; keeps each write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        if self.closed:
            raise RuntimeError("unable to perform operation: the handler is closed")
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    async def drain(self) -> None:
        return None


async def test_frames_sent_in_one_iteration_leave_in_one_write_in_order():
    stream = Stream()
    frames = FrameWriter(stream)  # type: ignore[arg-type]

    async def caller(data: bytes) -> None:
        frames.send(data)
        await frames.drain()

    await asyncio.gather(caller(b"one"), caller(b"two"), caller(b"three"))
    await asyncio.sleep(0)
    frames.send(b"four")
    await asyncio.sleep(0)

    assert stream.writes == [b"onetwothree", b"four"]


async def test_closing_writes_what_is_queued_first():
    stream = Stream()
    frames = FrameWriter(stream)  # type: ignore[arg-type]

    frames.send(b"last result")
    frames.close()
    await asyncio.sleep(0)

    assert (stream.writes, stream.closed) == ([b"last result"], True)


async def test_frames_queued_for_a_stream_closed_meanwhile_are_not_written_and_nothing_raises():
    stream = Stream()
    frames = FrameWriter(stream)  # type: ignore[arg-type]

    frames.send(b"too late")
    stream.close()  # the connection went away (the reading side fails what waits on it)
    await asyncio.sleep(0)

    assert stream.writes == []
