"""The sidecar's window: it serves runtimes of this frame protocol and of the one before (2),
and refuses any other with a message naming the versions and what to upgrade.

The protocol-2 runtime is `tests.protocol2` (why a double: its docstring); the first tests hold
that double, and this side's decoding, to bytes a protocol-2 runtime really sent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec
import pytest

from asya import Context, actor
from asya.actor import ActorConfig, ActorSpec, spec_of
from asya.envelope import Limits, Reason
from asya.errors import RuntimeProtocolError
from asya.handler import LocalInvoker
from asya.outcome import Emitted, Failure, Success
from asya.retry import RetrySchedule
from asya.runtime import protocols
from asya.runtime.client import RuntimeClient
from asya.runtime.frames import (
    HANDSHAKE_FRAME_BYTES,
    PROTOCOL,
    FrameBounds,
    FrameReader,
    Ping,
    Pong,
    Result,
    encode_frame,
    frame_bounds,
)
from tests import protocol2
from tests.factories import envelope

# Sent by the runtime of commit 0909f4a (protocol 2), run from a checkout of it with this
# handler, answering a Ping (id 1), then a Call (id 2) of one envelope routed on to `b`, with
# payload {"n": 1}, then one (id 3) with {"fail": True}:
#
#   @actor(name="work", timeout_s=7, concurrency=2,
#          retry=RetryPolicy(max_attempts=5, base_delay_ms=50, jitter=0.0))
#   def work(doc, ctx: Context):                      # line 4 of /tmp/p2probe/handlers_p2.py
#       if doc.get("fail"):
#           raise ValueError("no")
#       ctx.headers["seen"] = "yes"
#       return {**doc, "n": doc["n"] + 1}
RECORDED_PONG = bytes.fromhex(
    "86a474797065a4706f6e67a2696401a56163746f7286a46e616d65a4776f726ba974696d656f75745f73cb40"
    "1c000000000000ab636f6e63757272656e637902a56261746368c0ad62617463685f776169745f6d730aa572"
    "6574727986ac6d61785f617474656d70747305ad626173655f64656c61795f6d7332a6666163746f72cb4000"
    "000000000000ac6d61785f64656c61795f6d73cdea60a66a6974746572cb0000000000000000ae7265747279"
    "5f74696d656f757473c3a8636170616369747901a6626f756e647382aa63616c6c5f6279746573ce00c20000"
    "ac726573756c745f6279746573ce0c110000a870726f746f636f6c02"
)
RECORDED_SUCCESS = bytes.fromhex(
    "83a474797065a6726573756c74a2696402a86f7574636f6d65739183a76f7574636f6d65a26f6ba76f757470"
    "757473919381a16e0291a16281a47365656ea3796573a766616e5f6f7574c2"
)
RECORDED_FAILURE = bytes.fromhex(
    "83a474797065a6726573756c74a2696403a86f7574636f6d65739186a76f7574636f6d65a56572726f72a672"
    "6561736f6eac48616e646c65724572726f72a474797065b36275696c74696e732e56616c75654572726f72a7"
    "6d657373616765a26e6fa9726574727961626c65c3a974726163656261636bd98354726163656261636b2028"
    "6d6f737420726563656e742063616c6c206c617374293a0a202046696c6520222f746d702f703270726f6265"
    "2f68616e646c6572735f70322e7079222c206c696e6520362c20696e20776f726b0a20202020726169736520"
    "56616c75654572726f7228226e6f22290a56616c75654572726f723a206e6f0a"
)
RECORDED_TRACEBACK = (
    'Traceback (most recent call last):\n  File "/tmp/p2probe/handlers_p2.py", line 6, in work\n'
    '    raise ValueError("no")\nValueError: no\n'
)
RECORDED_ACTOR = ActorConfig(
    name="work",
    timeout_s=7.0,
    concurrency=2,
    retry=RetrySchedule(
        max_attempts=5,
        base_delay_ms=50,
        factor=2.0,
        max_delay_ms=60_000,
        jitter=0.0,
        retry_timeouts=True,
    ),
)
RECORDED_BOUNDS = FrameBounds(call_bytes=12_713_984, result_bytes=202_440_704)


def test_the_protocol2_double_encodes_its_frames_as_that_runtime_did():
    retry = protocol2.RetrySchedule(
        max_attempts=5,
        base_delay_ms=50,
        factor=2.0,
        max_delay_ms=60_000,
        jitter=0.0,
        retry_timeouts=True,
    )
    config = protocol2.ActorConfig(name="work", timeout_s=7.0, concurrency=2, retry=retry)
    bounds = protocol2.FrameBounds(call_bytes=12_713_984, result_bytes=202_440_704)
    pong = protocol2.Pong(1, config, 1, bounds, 2)
    emitted = protocol2.Emitted(payload={"n": 2}, next=("b",), headers={"seen": "yes"})
    success = protocol2.Result(2, [protocol2.Success(outputs=(emitted,))])
    failure = protocol2.Result(
        3,
        [
            protocol2.Failure(
                reason="HandlerError",
                type="builtins.ValueError",
                message="no",
                retryable=True,
                traceback=RECORDED_TRACEBACK,
            )
        ],
    )

    encoded = [protocol2.encode_frame(frame)[4:] for frame in (pong, success, failure)]

    assert encoded == [RECORDED_PONG, RECORDED_SUCCESS, RECORDED_FAILURE]


async def _read_all(data: bytes) -> list[object]:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    frames = FrameReader(reader)
    read: list[object] = []
    while (frame := await frames.read(RECORDED_BOUNDS.result_bytes)) is not None:
        read.append(frame)
    return read


async def test_what_a_protocol2_runtime_sent_is_read_here_field_for_field():
    framed = [len(body).to_bytes(4, "big") + body for body in (RECORDED_PONG, RECORDED_SUCCESS)]

    pong, result = await _read_all(b"".join(framed))

    assert pong == Pong(1, RECORDED_ACTOR, 1, RECORDED_BOUNDS, 2)
    assert result == Result(
        2, [Success(outputs=(Emitted(payload={"n": 2}, next=("b",), headers={"seen": "yes"}),))]
    )


async def test_a_failure_a_protocol2_runtime_sent_is_read_here_field_for_field():
    framed = len(RECORDED_FAILURE).to_bytes(4, "big") + RECORDED_FAILURE

    [result] = await _read_all(framed)

    assert result == Result(
        3,
        [
            Failure(
                reason=Reason.HANDLER_ERROR,
                type="builtins.ValueError",
                message="no",
                retryable=True,
                traceback=RECORDED_TRACEBACK,
            )
        ],
    )


def handlers() -> dict[str, ActorSpec]:
    """Actors of each calling convention, declared in the test's own registry."""

    @actor(concurrency=2)
    def returns(doc, ctx: Context):
        if doc.get("fail"):
            raise ValueError("no")
        ctx.headers["seen"] = "yes"
        ctx.route.next.append("c")
        return {**doc, "n": doc["n"] + 1}

    @actor
    def splits(doc):
        yield from ({"part": i} for i in range(doc["n"]))

    @actor(batch=3)
    def batches(docs):
        return [{**doc, "batched": len(docs)} for doc in docs]

    specs = {name: spec_of(target) for name, target in locals().items()}
    return {name: spec for name, spec in specs.items() if spec is not None}


CALLS = [
    pytest.param("returns", [envelope("returns", ["b"], payload={"n": 1})], id="returns"),
    pytest.param("returns", [envelope("returns", payload={"fail": True})], id="raises"),
    pytest.param("splits", [envelope("splits", payload={"n": 3})], id="yields"),
    pytest.param(
        "batches",
        [envelope("batches", id=f"e{i}", payload={"i": i}) for i in range(3)],
        id="batch",
    ),
]


@pytest.mark.parametrize(("handler", "envelopes"), CALLS)
async def test_a_protocol2_runtime_is_served_with_the_outcomes_its_handler_gives(
    tmp_path, handler, envelopes
):
    spec = handlers()[handler]
    here = LocalInvoker(spec)
    await here.start()
    expected = await here.invoke(envelopes)

    async with (
        protocol2.Protocol2Runtime(spec, str(tmp_path / "rt.sock")) as runtime,
        RuntimeClient(runtime.path) as client,
    ):
        outcomes = await client.invoke(envelopes)

    assert client.pong is not None
    assert (client.pong.protocol, client.pong.actor) == (2, spec.config)
    assert outcomes == expected


async def test_a_drain_tells_a_protocol2_runtime_nothing_and_its_connection_stays(tmp_path):
    spec = handlers()["returns"]

    async with (
        protocol2.Protocol2Runtime(spec, str(tmp_path / "rt.sock")) as runtime,
        RuntimeClient(runtime.path) as client,
    ):
        client.drain()
        outcomes = await client.invoke([envelope("returns", payload={"n": 1})])
        connected = client.connected

    assert connected
    assert isinstance(outcomes[0], Success)
    assert runtime.frames_seen == ["Ping", "Call"]


def test_a_sidecar_queues_calls_only_at_a_runtime_it_can_drain():
    depths = {version: protocols.DIALECTS[version].pipeline_depth(2) for version in (2, 3)}

    assert depths == {2: 0, 3: 2}
    assert (protocols.OLDEST, max(protocols.DIALECTS)) == (2, PROTOCOL)


async def refusal(path: str, pong: Callable[[int], bytes]) -> RuntimeProtocolError:
    """What a client connecting to a runtime that answers its Ping with `pong(id)` (a whole
    frame) raises; the stand-in runtime is gone when this returns."""
    served = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frame = await FrameReader(reader).read(HANDSHAKE_FRAME_BYTES)
        assert isinstance(frame, Ping)
        writer.write(pong(frame.id))
        await writer.drain()
        await reader.read()  # until the client hangs up
        writer.close()
        await writer.wait_closed()
        served.set()

    server = await asyncio.start_unix_server(serve, path=path)
    client = RuntimeClient(path)
    try:
        with pytest.raises(RuntimeProtocolError) as raised:
            await client.connect()
    finally:
        await asyncio.wait_for(served.wait(), 10)
        server.close()
        await server.wait_closed()
    assert not client.connected
    return raised.value


def _pong_of(version: int, **extra: object) -> Callable[[int], bytes]:
    """A Pong of protocol `version` with `extra` fields (as a newer runtime may add)."""
    bounds = frame_bounds(Limits(), None)

    def pong(call_id: int) -> bytes:
        fields = msgspec.to_builtins(Pong(call_id, ActorConfig(name="a"), 1, bounds, version))
        body = msgspec.msgpack.encode({**fields, **extra})
        return len(body).to_bytes(4, "big") + body

    return pong


@pytest.mark.parametrize("version", [0, 1])
async def test_a_runtime_older_than_the_window_is_refused_saying_to_rebuild_its_image(
    tmp_path, version
):
    error = await refusal(str(tmp_path / "rt.sock"), _pong_of(version))

    assert str(error) == (
        f"the runtime speaks frame protocol {version}, older than this sidecar serves (this"
        f" sidecar serves runtimes of protocol 2 to {PROTOCOL}): rebuild the actor's image with"
        " the asya version of the operator"
    )


async def test_a_runtime_newer_than_the_sidecar_is_refused_saying_to_upgrade_the_operator(
    tmp_path,
):
    newer = _pong_of(PROTOCOL + 1, workers=[{"pid": 7}])

    error = await refusal(str(tmp_path / "rt.sock"), newer)

    assert str(error) == (
        f"the runtime speaks frame protocol {PROTOCOL + 1}, newer than this sidecar's {PROTOCOL}"
        f" (this sidecar serves runtimes of protocol 2 to {PROTOCOL}): upgrade the asya operator,"
        " which gives every actor's pod its sidecar, to the asya version of the actor's image or"
        " newer"
    )


async def test_a_runtime_older_than_the_protocol_field_is_refused_as_too_old(tmp_path):
    # Its Pong: the actor's options flat (no `retry` Struct), no `protocol`.
    bounds = frame_bounds(Limits(), None)
    legacy = {
        "type": "pong",
        "actor": {
            "name": "a",
            "timeout_s": 300.0,
            "concurrency": 1,
            "batch": None,
            "batch_wait_ms": 10,
            "max_attempts": 3,
            "base_delay_ms": 1000,
            "factor": 2.0,
            "max_delay_ms": 60000,
            "jitter": 0.1,
            "retry_timeouts": True,
        },
        "capacity": 1,
        "bounds": {"call_bytes": bounds.call_bytes, "result_bytes": bounds.result_bytes},
    }

    def pong(call_id: int) -> bytes:
        body = msgspec.msgpack.encode({**legacy, "id": call_id})
        return len(body).to_bytes(4, "big") + body

    error = await refusal(str(tmp_path / "rt.sock"), pong)

    assert "the runtime speaks frame protocol 0, older than this sidecar serves" in str(error)


def test_a_sidecar_that_predates_partial_outcomes_reads_one_as_the_whole_call_failed():
    # Outcomes are the same in protocols 2 and 3 until `Failure.partial`: the double's Result
    # reads as a sidecar from before it did. A runtime newer than its sidecar is refused only
    # when the protocol moves; this field alone does not move it, so that sidecar must read
    # the safe old answer (every output failed) and never an output left out (payload None).
    kept, lost = Emitted(payload={"n": 1}, next=("b",)), Emitted(payload=None, next=("b",))
    partial = Success(outputs=(kept, lost), fan_out=True, unsendable={1: "payload.x is {1}"})
    failure = Failure(
        reason=Reason.INVALID_OUTPUT,
        type="InvalidOutput",
        message="output of 'work' cannot be sent: payload.x is {1}",
        retryable=False,
        partial=partial,
    )
    body = encode_frame(Result(7, [failure]))[4:]

    old = msgspec.msgpack.decode(body, type=protocol2.Frame)

    assert old == protocol2.Result(
        7,
        [
            protocol2.Failure(
                reason="InvalidOutput",
                type="InvalidOutput",
                message="output of 'work' cannot be sent: payload.x is {1}",
                retryable=False,
            )
        ],
    )
