"""One actor name asked for twice in a namespace (ActorGroup `a`'s member `b-c`, ActorGroup
`a-b`'s member `c`, AsyncActor `a-b-c`): the object created first runs as it, the later one is
Degraded (NameTaken) and runs nothing, and deleting it leaves the first one's queue, envelopes
and all. On the stand-in cluster, with the real broker."""

from __future__ import annotations

from typing import Any

import pytest
from asya_operator.api.template import GROUP, VERSION

from tests.operator.controller_world import (
    ACTORS,
    DEPLOYMENTS,
    GROUPS,
    STATEFULSETS,
    async_actor,
    condition_of,
    observed,
)

pytestmark = pytest.mark.rabbitmq


def group(name: str, *members: str) -> dict[str, Any]:
    """A group in no pool, each member one pod."""
    template = {"image": "ghcr.io/acme/train:1", "handler": "train:step"}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ActorGroup",
        "metadata": {"name": name},
        "spec": {"members": [{"name": m, "replicas": 1, "template": template} for m in members]},
    }


@pytest.fixture
async def named_queues(queues):
    """The queues of these tests' actors go after the test."""
    yield queues
    await queues.delete_queues({"a-b-c", "a-b-d"})


def degraded(body: dict[str, Any] | None) -> bool:
    return body is not None and condition_of(body, "Degraded").get("status") == "True"


async def first_group_running_with_envelopes(world, queues) -> None:
    await world.create_group(group("a", "b-c"))
    await world.wait_for(GROUPS, "a", lambda g: observed(g) == 1, "group a applied")
    await world.wait_exists(STATEFULSETS, "a-b-c-0")
    for _ in range(3):
        await queues.publish("a-b-c", b"{}")


async def test_a_group_running_as_another_groups_member_is_refused_and_its_deletion_keeps_the_queue(
    world, broker_secret, operator, named_queues
):
    # Given: group a runs as a-b-c, and its queue holds three envelopes
    await first_group_running_with_envelopes(world, named_queues)

    # When: group a-b, whose member c runs as a-b-c too (and d as a-b-d), is created
    await world.create_group(group("a-b", "c", "d"))

    # Then: it is Degraded, naming group a, and runs nothing
    refused = await world.wait_for(GROUPS, "a-b", degraded, "a-b Degraded")
    said = condition_of(refused, "Degraded")
    assert said["reason"] == "NameTaken"
    assert (
        f"which ActorGroup {world.namespace}/a (its member b-c) already runs as"
        in (said["message"])
    )
    assert await world.get(STATEFULSETS, "a-b-d-0") is None
    sets = await world.get(STATEFULSETS, "a-b-c-0")
    assert sets is not None
    assert sets["metadata"]["labels"]["asya.sh/group"] == "a"

    # When: the refused group is deleted
    await world.delete_group("a-b")
    await world.wait_for(GROUPS, "a-b", lambda g: g is None, "a-b gone")

    # Then: group a's queue is there with what it held
    assert (await named_queues.depth("a-b-c")).ready == 3


async def test_an_actor_named_as_an_older_groups_member_is_refused_and_its_deletion_keeps_the_queue(
    world, broker_secret, operator, named_queues
):
    # Given: group a runs as a-b-c, and its queue holds three envelopes
    await first_group_running_with_envelopes(world, named_queues)

    # When: AsyncActor a-b-c is created
    await world.create_actor(async_actor("a-b-c"))

    # Then: it is Degraded, naming the group, and nothing is applied for it
    refused = await world.wait_for(ACTORS, "a-b-c", degraded, "a-b-c Degraded")
    said = condition_of(refused, "Degraded")
    assert said["reason"] == "NameTaken"
    assert (
        f"is what ActorGroup {world.namespace}/a (its member b-c) already runs as"
        in (said["message"])
    )
    assert await world.get(DEPLOYMENTS, "a-b-c") is None
    assert not degraded(await world.get(GROUPS, "a"))

    # When: the refused actor is deleted
    await world.delete_actor("a-b-c")
    await world.wait_for(ACTORS, "a-b-c", lambda a: a is None, "a-b-c gone")

    # Then: the group's queue is there with what it held
    assert (await named_queues.depth("a-b-c")).ready == 3


async def test_deleting_a_group_refused_the_name_of_an_older_actor_keeps_the_actors_queue(
    world, broker_secret, operator, named_queues
):
    # Given: AsyncActor a-b-c runs, its queue holding three envelopes, and group a, created
    # after it, is refused for its member b-c
    await world.create_actor(async_actor("a-b-c"))
    await world.wait_for(ACTORS, "a-b-c", lambda a: observed(a) == 1, "a-b-c applied")
    for _ in range(3):
        await named_queues.publish("a-b-c", b"{}")
    await world.create_group(group("a", "b-c"))
    refused = await world.wait_for(GROUPS, "a", degraded, "group a Degraded")
    assert condition_of(refused, "Degraded")["reason"] == "NameTaken"

    # When: the refused group is deleted
    await world.delete_group("a")
    await world.wait_for(GROUPS, "a", lambda g: g is None, "group a gone")

    # Then: the actor's queue is there with what it held
    assert (await named_queues.depth("a-b-c")).ready == 3
