"""The runtime socket holds its peers to bounds: frame sizes, frame time, connections, access."""

from __future__ import annotations

import asyncio
import logging
import textwrap

import msgspec
import pytest

from asya import actor
from asya.actor import spec_of
from asya.envelope import Envelope, Limits, Reason
from asya.errors import RuntimeUnavailableError
from asya.handler import LocalInvoker
from asya.outcome import Failure, Success
from asya.runtime.client import RuntimeClient
from asya.runtime.frames import encode_outcome, frame_bounds
from asya.runtime.server import MAX_CONNECTIONS, RuntimeServer
from tests.integration.runtime.processes import call, connect, start_runtime

HANDLERS = textwrap.dedent(
    """
    from asya import actor

    @actor
    def work(doc):
        return {"blob": "x" * doc.get("size", 0)}
    """
)

SMALL_LIMIT = "1000"
"""ASYA_MAX_PAYLOAD_BYTES for the runtimes here: a frame bound of about 130 KiB per call."""


@pytest.fixture
async def small_runtime(tmp_path):
    """A runtime whose payload limit is 1,000 bytes, and a client connected to it."""
    rt = await start_runtime(
        tmp_path, HANDLERS, "handlers_mod:work", ASYA_MAX_PAYLOAD_BYTES=SMALL_LIMIT
    )
    client = await connect(rt)
    yield rt, client
    await client.aclose()
    await rt.stop()


async def closed_by_peer(reader: asyncio.StreamReader, timeout_s: float = 15) -> bool:
    return await asyncio.wait_for(reader.read(), timeout_s) == b""


async def test_a_frame_over_the_payload_bound_is_refused_without_reading_it(small_runtime):
    rt, _ = small_runtime
    reader, writer = await asyncio.open_unix_connection(rt.socket_path)

    # 1 MiB: far below any fixed cap, far above 1,000 bytes of payload plus the envelope.
    writer.write((1024 * 1024).to_bytes(4, "big"))
    await writer.drain()
    closed = await closed_by_peer(reader)
    writer.close()

    assert closed


async def test_a_result_over_the_bound_fails_as_payload_too_large_and_the_connection_stays(
    small_runtime,
):
    _, client = small_runtime

    [too_large] = await client.invoke(call({"size": 2_000_000}))
    [ok] = await client.invoke(call({"size": 10}))

    assert isinstance(too_large, Failure)
    assert (too_large.reason, too_large.retryable) == (Reason.PAYLOAD_TOO_LARGE, False)
    assert isinstance(ok, Success)


async def test_a_call_over_the_runtimes_bound_is_not_sent_and_fails_as_payload_too_large(
    small_runtime,
):
    _, client = small_runtime

    [too_large] = await client.invoke(call({"blob": "x" * 2_000_000}))
    [ok] = await client.invoke(call({"size": 10}))

    assert isinstance(too_large, Failure)
    assert (too_large.reason, too_large.retryable) == (Reason.PAYLOAD_TOO_LARGE, False)
    assert isinstance(ok, Success)


async def test_connections_past_the_limit_are_closed_at_once_and_logged(tmp_path):
    rt = await start_runtime(tmp_path, HANDLERS, "handlers_mod:work")
    clients = [await connect(rt) for _ in range(MAX_CONNECTIONS)]

    extra = RuntimeClient(rt.socket_path)
    with pytest.raises(RuntimeUnavailableError):
        await extra.connect()
    outcomes = [(await c.invoke(call({})))[0] for c in clients]
    for client in clients:
        await client.aclose()
    await rt.stop()

    assert all(isinstance(o, Success) for o in outcomes)
    assert "runtime connection refused: too many connections" in await rt.stderr()


async def test_the_socket_directory_is_created_private_to_the_runtime(tmp_path):
    directory = tmp_path / "run" / "asya"
    rt = await start_runtime(
        tmp_path, HANDLERS, "handlers_mod:work", socket_path=str(directory / "rt.sock")
    )
    client = await connect(rt)

    mode = directory.stat().st_mode & 0o777
    await client.aclose()
    await rt.stop()

    assert mode == 0o700


async def test_an_existing_socket_directory_keeps_its_mode(tmp_path):
    directory = tmp_path / "shared"
    directory.mkdir()
    directory.chmod(0o755)
    rt = await start_runtime(
        tmp_path, HANDLERS, "handlers_mod:work", socket_path=str(directory / "rt.sock")
    )
    client = await connect(rt)

    mode = directory.stat().st_mode & 0o777
    await client.aclose()
    await rt.stop()

    assert mode == 0o755


class InProcess:
    """The supervisor's side of a runtime without worker processes: calls decoded and run by
    a `LocalInvoker` here."""

    def __init__(self, invoker: LocalInvoker) -> None:
        self._invoker = invoker

    async def invoke_raw(self, envelopes: list[msgspec.Raw]) -> list[msgspec.Raw]:
        decoded = [msgspec.msgpack.decode(e, type=Envelope) for e in envelopes]
        return [encode_outcome(o) for o in await self._invoker.invoke(decoded)]

    def drain(self) -> None:
        self._invoker.drain()


@pytest.fixture
async def quick_timeout_server(tmp_path):
    """A runtime server in this process whose started frames must arrive within 0.2 s."""

    @actor
    def echo(doc):
        return doc

    spec = spec_of(echo)
    assert spec is not None
    invoker = LocalInvoker(spec)
    await invoker.start()
    info = spec.config
    server = RuntimeServer(
        InProcess(invoker),
        info,
        1,
        str(tmp_path / "rt.sock"),
        frame_bounds(Limits(), None),
        frame_timeout_s=0.2,
    )
    await server.start()
    yield server, str(tmp_path / "rt.sock")
    await server.stop(1)
    await invoker.aclose()


async def test_a_frame_that_stalls_midway_is_dropped_but_an_idle_connection_is_kept(
    quick_timeout_server, caplog
):
    _, socket_path = quick_timeout_server
    idle = RuntimeClient(socket_path)
    await idle.connect()
    reader, writer = await asyncio.open_unix_connection(socket_path)

    writer.write(b"\x00\x00")  # half a header, and nothing more
    await writer.drain()
    stalled_closed = await closed_by_peer(reader)
    writer.close()
    # The idle connection has now been quiet for longer than the frame timeout.
    [outcome] = await idle.invoke(call({"n": 1}, "echo"))
    await idle.aclose()

    assert stalled_closed
    assert isinstance(outcome, Success)
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.getMessage() == "closing a connection whose peer broke the protocol"
    assert "did not arrive whole within 0.2 s" in record.error
