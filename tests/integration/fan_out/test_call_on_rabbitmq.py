"""On a real broker, a call waits for every envelope of its fan-out tree and returns them all."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from asya.client import Client
from asya.clock import SystemClock
from asya.envelope import Branch, Reason
from asya.local.discovery import load_app
from asya.local.mesh import Mesh, MeshOptions
from asya.local.report import RunStats

pytestmark = pytest.mark.rabbitmq

TREE_APP = Path(__file__).parents[2] / "unit" / "client" / "tree_app.py"


async def ignore(envelope):
    return None


async def test_a_call_through_in_process_consumers_returns_every_leaf_of_a_nested_fan_out(
    transport, actor_names
):
    actor_names.update({"tree", "check"})
    stats = RunStats(ignore)
    mesh = Mesh(
        load_app(str(TREE_APP)).specs,
        transport=transport,
        hooks=stats,
        sink=stats,
        clock=SystemClock(),
        rng=random.Random(),
        options=MeshOptions(grace_s=1),
    )

    async with mesh:
        results = await Client(transport).call(["tree", "check"], [1, [2, "bad"], []], timeout_s=30)

    assert results.payloads == [1, 2, []]
    assert [(f.payload, f.status.reason) for f in results.failed] == [("bad", Reason.HANDLER_ERROR)]
    assert results.failed[0].lineage == (Branch(index=2, of=3), Branch(index=2, of=2))


async def test_a_call_through_pods_returns_every_leaf_and_its_failure(
    pods, finals, amqp_url, namespace
):
    await pods(TREE_APP.read_text(), "tree", "check")

    async with Client(amqp_url, namespace=namespace) as client:
        results = await client.call(["tree", "check"], [[1, "bad"], 2, []], timeout_s=60)

    assert results.payloads == [1, 2, []]
    assert [f.payload for f in results.failed] == ["bad"]
