"""A worker process holds its outputs to the same rule as the in-process runner.

Outcomes cross from a worker to the sidecar as msgpack, which would carry a set as a list, a
date or a UUID as a string: the worker checks each output as JSON first and sends the problem in
its place, so what fails as `InvalidOutput` in-process (`asya.testing.run`, `asya dev`) fails the
same way under `asya serve`, `--isolate`, GPU workers and in pods, with the same message, and
alone (the call's other outputs go on: tests/examples/test_first_day_parity.py).
"""

from __future__ import annotations

import textwrap

import pytest

from asya.envelope import Reason
from asya.outcome import Failure, Success
from tests.integration.runtime.processes import call, connect, start_runtime

HANDLERS = textwrap.dedent(
    """
    import datetime, uuid
    from asya import actor

    BAD = {
        "set": {"tags": {"a", "b"}},
        "date": {"on": datetime.date(2026, 1, 1)},
        "uuid": {"id": uuid.UUID(int=7)},
        "nan": {"scores": [0.5, float("nan")]},
        "int-key": {"counts": {1: "a"}},
    }

    @actor
    def work(doc):
        return BAD.get(doc["kind"], {"box": (1, 2)})

    @actor
    def split(doc):
        yield {"box": (1, 2)}
        yield BAD["set"]
        yield {"n": 3}
    """
)


@pytest.fixture
async def client(tmp_path):
    rt = await start_runtime(tmp_path, HANDLERS, "handlers_mod:work")
    runtime_client = await connect(rt)
    yield runtime_client
    await runtime_client.aclose()
    await rt.stop()


@pytest.mark.parametrize(
    ("kind", "named"),
    [
        ("set", "payload.tags is {"),
        ("date", "payload.on is datetime.date(2026, 1, 1)"),
        ("uuid", "payload.id is UUID("),
        ("nan", "payload.scores[1] is nan"),
        ("int-key", "payload.counts has the key 1 (int)"),
    ],
)
async def test_an_output_json_would_change_fails_in_a_worker_and_is_left_out_named_with_why(
    client, kind, named
):
    [outcome] = await client.invoke(call({"kind": kind}))

    # What a sidecar from before `partial` reads: the call failed, as in-process.
    assert isinstance(outcome, Failure)
    assert outcome.reason is Reason.INVALID_OUTPUT
    assert not outcome.retryable
    assert outcome.message.startswith(f"output of 'work' cannot be sent: {named}")
    # What this version's sidecar routes instead.
    assert outcome.partial is not None
    assert outcome.partial.outputs[0].payload is None
    assert outcome.partial.unsendable[0].startswith(named)


async def test_an_output_converted_on_purpose_passes_a_worker(client):
    [outcome] = await client.invoke(call({"kind": "tuple"}))

    assert isinstance(outcome, Success)
    assert outcome.outputs[0].payload == {"box": [1, 2]}


async def test_only_the_output_json_would_change_is_left_out_of_a_fan_out(tmp_path):
    rt = await start_runtime(tmp_path, HANDLERS, "handlers_mod:split")
    runtime_client = await connect(rt)
    try:
        [outcome] = await runtime_client.invoke(call({}))
    finally:
        await runtime_client.aclose()
        await rt.stop()

    assert isinstance(outcome, Failure)
    partial = outcome.partial
    assert partial is not None
    assert partial.fan_out
    assert [o.payload for o in partial.outputs] == [{"box": [1, 2]}, None, {"n": 3}]
    assert list(partial.unsendable) == [1]
    assert partial.unsendable[1].startswith("payload.tags is {")
