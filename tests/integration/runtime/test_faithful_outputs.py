"""A worker process holds its outputs to the same rule as the in-process runner.

Outcomes cross from a worker to the sidecar as msgpack, which would carry a set as a list, a
date or a UUID as a string: the worker checks each output as JSON first, so what fails as
`InvalidOutput` in-process (`asya.testing.run`, `asya dev`) fails the same way under `asya
serve`, `--isolate`, GPU workers and in pods, with the same message.
"""

from __future__ import annotations

import textwrap
import uuid

import pytest

from asya import actor
from asya.envelope import Reason
from asya.outcome import Failure, Success
from asya.testing import acall_actor
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
async def test_an_output_json_would_change_fails_in_a_worker_as_it_does_in_process(
    client, kind, named
):
    [outcome] = await client.invoke(call({"kind": kind}))

    assert isinstance(outcome, Failure)
    assert outcome.reason is Reason.INVALID_OUTPUT
    assert not outcome.retryable
    assert outcome.message.startswith(f"output of 'work' cannot be sent: {named}")


async def test_an_output_converted_on_purpose_passes_a_worker(client):
    [outcome] = await client.invoke(call({"kind": "tuple"}))

    assert isinstance(outcome, Success)
    assert outcome.outputs[0].payload == {"box": [1, 2]}


async def test_the_message_is_the_one_call_actor_gives(client):
    @actor
    def work(doc):
        return {"id": uuid.UUID(int=7)}

    [outcome] = await client.invoke(call({"kind": "uuid"}))

    assert outcome.message == (await acall_actor(work, {"kind": "uuid"})).failure.message
