"""A call returns when every envelope descending from it is final, with all of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from asya.client import CallTimeoutError, Client, ManyFinalsError
from asya.envelope import Branch, Reason
from asya.local.discovery import load_app
from asya.local.mesh import Mesh, MeshOptions
from asya.local.report import RunStats
from asya.transport.memory import MemoryTransport
from tests.factories import FakeClock, rng

TREE_APP = Path(__file__).with_name("tree_app.py")


async def ignore(envelope):
    return None


@pytest.fixture
async def client():
    transport = MemoryTransport()
    stats = RunStats(ignore)
    async with Mesh(
        load_app(str(TREE_APP)).specs,
        transport=transport,
        hooks=stats,
        sink=stats,
        clock=FakeClock(),
        rng=rng(),
        options=MeshOptions(grace_s=0.1),
    ):
        yield Client(transport, clock=FakeClock(), rng=rng())
    await transport.aclose()


async def test_a_call_that_fans_out_returns_every_leaf_in_tree_order(client):
    results = await client.call(["tree", "check"], ["a", "b", "c"], timeout_s=10)

    assert results.payloads == ["a", "b", "c"]
    assert [f.id[-2:] for f in results] == ["-1", "-2", "-3"]
    assert results.ok


async def test_a_nested_fan_out_returns_the_leaves_of_every_level(client):
    results = await client.call(["tree", "check"], [1, [2, [3, 4]], 5], timeout_s=10)

    assert results.payloads == [1, 2, 3, 4, 5]
    assert [f.lineage for f in results][2] == (
        Branch(index=2, of=3),
        Branch(index=2, of=2),
        Branch(index=1, of=2),
    )


async def test_a_fan_out_to_zero_children_ends_the_call_with_its_own_envelope(client):
    results = await client.call(["tree", "check"], [], timeout_s=10)

    assert results.payloads == [[]]
    assert results.finals[0].lineage == ()


async def test_a_branch_fanning_out_to_zero_children_is_one_leaf_among_its_siblings(client):
    results = await client.call(["tree", "check"], [1, [], 2], timeout_s=10)

    assert results.payloads == [1, [], 2]


async def test_a_failed_child_is_returned_with_its_succeeded_siblings(client):
    results = await client.call(["tree", "check"], [1, "bad", [2, "bad"]], timeout_s=10)

    assert results.payloads == [1, 2]
    assert [f.payload for f in results.failed] == ["bad", "bad"]
    assert not results.ok
    assert {reason: len(finals) for reason, finals in results.by_reason().items()} == {
        None: 2,
        Reason.HANDLER_ERROR: 2,
    }


async def test_the_one_final_of_a_call_that_does_not_fan_out(client):
    final = (await client.call(["check"], "fine", timeout_s=10)).one()

    assert final.payload == "fine"


async def test_asking_for_one_final_of_a_fan_out_raises_with_every_final_attached(client):
    results = await client.call(["tree", "check"], [1, 2], timeout_s=10)

    with pytest.raises(ManyFinalsError) as caught:
        results.one()

    assert caught.value.results.payloads == [1, 2]


async def test_a_call_not_complete_in_time_times_out_with_the_finals_that_came(client):
    with pytest.raises(CallTimeoutError) as caught:
        await client.call(["tree", "check"], [1, "slow"], timeout_s=2)

    assert caught.value.results.payloads == [1]
    assert caught.value.covered == 0.5
    assert isinstance(caught.value, TimeoutError)
