"""The client puts envelopes into a mesh and waits for their final envelope."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from asya import Client, actor
from asya.actor import REGISTRY
from asya.envelope import REPLY_TO_HEADER, Phase
from asya.errors import EnvelopeError, UnknownActorError
from asya.local.mesh import Mesh
from asya.local.report import RunStats
from asya.transport.memory import MemoryTransport
from tests.factories import T0, FakeClock, rng


async def ignore(envelope):
    return None


@pytest.fixture
async def mesh():
    @actor
    def upper(doc):
        return doc.upper()

    @actor
    async def slow(doc):
        await asyncio.sleep(30)

    transport = MemoryTransport()
    stats = RunStats(ignore)
    async with Mesh(
        list(REGISTRY),
        transport=transport,
        hooks=stats,
        sink=stats,
        clock=FakeClock(),
        rng=rng(),
    ):
        yield Client(transport, clock=FakeClock(), rng=rng())
    await transport.aclose()


async def test_call_returns_the_final_envelope_of_the_route(mesh):
    final = (await mesh.call(["upper"], "hi", timeout_s=5, headers={"team": "a"})).one()

    assert final.payload == "HI"
    assert final.status.phase is Phase.SUCCEEDED
    assert final.headers["team"] == "a"
    assert REPLY_TO_HEADER in final.headers


async def test_call_gives_up_after_its_timeout(mesh):
    with pytest.raises(TimeoutError):
        await mesh.call(["slow"], 1, timeout_s=0.05)


async def test_sending_to_a_first_actor_without_a_queue_fails_at_the_client(mesh):
    with pytest.raises(UnknownActorError) as caught:
        await mesh.send(["translate", "upper"], "x")

    assert caught.value.actor == "translate"


@pytest.mark.parametrize(
    ("route", "expected"),
    [([], "route is empty"), (["Upper"], "not a valid actor name"), (["error-end"], "end actor")],
)
async def test_a_route_that_cannot_be_followed_is_refused_before_publishing(mesh, route, expected):
    with pytest.raises(EnvelopeError, match=expected):
        await mesh.send(route, "x")


def test_a_new_envelope_carries_its_route_and_deadline():
    client = Client(MemoryTransport(), clock=FakeClock(), rng=rng())

    env = client.envelope(["a", "b", "c"], {"k": 1}, deadline=timedelta(seconds=30))

    assert (env.route.curr, env.route.next, env.route.prev) == ("a", ("b", "c"), ())
    assert env.status.created_at == T0
    assert env.status.deadline_at == T0 + timedelta(seconds=30)
    assert len(env.id) == 26
