"""AsyncActors whose stored spec the operator refuses: each is Degraded alone, with a Warning
Event naming the field, its neighbours are reconciled as usual, and its deletion completes."""

from __future__ import annotations

import pytest

from tests.operator.controller_world import (
    ACTORS,
    DEPLOYMENTS,
    GROUPS,
    STATEFULSETS,
    async_actor,
    condition_of,
    observed,
)
from tests.operator.test_controller_gangs import gang


async def warnings_about(world, name: str) -> list[tuple[str, str]]:
    return [
        (e["reason"], e["message"])
        for e in await world.events()
        if e["involved_object"]["name"] == name and e["type"] == "Warning"
    ]


@pytest.mark.rabbitmq
async def test_an_actor_that_does_not_decode_is_degraded_alone_and_its_neighbours_are_applied(
    world, broker_secret, operator, queues
):
    # Given: an actor whose stored spec does not fit the model (the stand-in does not validate)
    await world.create_actor(async_actor("other", scaling={"maxReplicas": "many"}))

    # When: a good actor is created beside it
    await world.create_actor(async_actor("text"))

    # Then: the good one is applied, the bad one Degraded, naming the field, in an Event too
    await world.wait_exists(DEPLOYMENTS, "text")
    await world.wait_for(ACTORS, "text", lambda o: observed(o) == 1, "text applied")
    bad = await world.wait_condition("other", "Degraded", "True")
    degraded = condition_of(bad, "Degraded")
    assert degraded["reason"] == "InvalidSpec"
    assert "$.spec.scaling.maxReplicas" in degraded["message"]
    assert observed(bad) is None
    assert await world.get(DEPLOYMENTS, "other") is None
    [(reason, message)] = await warnings_about(world, "other")
    assert reason == "InvalidSpec"
    assert "$.spec.scaling.maxReplicas" in message


@pytest.mark.rabbitmq
async def test_an_actor_that_does_not_decode_is_still_deleted(
    world, broker_secret, operator, queues
):
    # Given: a refused actor, behind the operator's finalizer
    await world.create_actor(async_actor("other", scaling={"maxReplicas": "many"}))
    await world.wait_condition("other", "Degraded", "True")

    # When
    await world.delete_actor("other")

    # Then: its finalizer is removed, and it is gone
    gone = await world.wait_for(ACTORS, "other", lambda o: o is None, "AsyncActor other deleted")
    assert gone is None


@pytest.mark.rabbitmq
@pytest.mark.parametrize(
    ("name", "spec", "says"),
    [
        (
            "text",
            {"scaling": {"minReplicas": 5, "maxReplicas": 2}},
            "scaling.minReplicas must not be above scaling.maxReplicas",
        ),
        ("text", {"handler": "text.normalize"}, "spec.handler must look like module:attr"),
        ("t" * 80, {}, "metadata.name is the actor's name: at most 53 characters"),
    ],
    ids=["min-above-max", "handler-without-colon", "name-of-80-characters"],
)
async def test_a_stored_spec_its_crd_would_refuse_is_degraded_and_nothing_is_applied(
    world, broker_secret, operator, queues, name, spec, says
):
    # When: an actor the CRD would refuse today is stored (the stand-in does not validate)
    await world.create_actor(async_actor(name, **spec))

    # Then: it is Degraded, saying what to fix, and nothing is applied for it
    refused = await world.wait_condition(name, "Degraded", "True")
    degraded = condition_of(refused, "Degraded")
    assert degraded["reason"] == "InvalidSpec"
    assert says in degraded["message"]
    assert observed(refused) is None
    assert await world.get(DEPLOYMENTS, name) is None


@pytest.mark.rabbitmq
async def test_a_group_that_does_not_decode_is_degraded_with_an_event_and_is_still_deleted(
    world, broker_secret, operator, queues
):
    # Given: a group whose stored spec does not fit the model (the stand-in does not validate)
    group = gang("train")
    group["spec"]["readinessTimeoutSeconds"] = "soon"
    await world.create_group(group)

    # Then: Degraded, naming the field, in a Warning Event too; nothing made for it
    bad = await world.wait_for(
        GROUPS,
        "train",
        lambda g: g is not None and (condition_of(g, "Degraded") or {}).get("status") == "True",
        "ActorGroup train Degraded",
    )
    degraded = condition_of(bad, "Degraded")
    assert degraded["reason"] == "InvalidSpec"
    assert "$.spec.readinessTimeoutSeconds" in degraded["message"]
    [(reason, message)] = await warnings_about(world, "train")
    assert reason == "InvalidSpec"
    assert "$.spec.readinessTimeoutSeconds" in message
    assert await world.get(STATEFULSETS, "train-worker-0") is None

    # When it is deleted, its finalizer is removed and it is gone
    await world.delete_group("train")
    gone = await world.wait_for(GROUPS, "train", lambda g: g is None, "ActorGroup train deleted")
    assert gone is None


def _misspelt_nfs(body: dict) -> str | None:
    """As the API server's strict field validation words an unknown field."""
    volumes = body.get("spec", {}).get("template", {}).get("spec", {}).get("volumes", [])
    for index, volume in enumerate(volumes):
        for field in volume.get("nfs", {}):
            if field not in ("server", "path", "readOnly"):
                return (
                    f'Deployment in version "v1" cannot be handled as a Deployment: strict'
                    f' decoding error: unknown field "spec.template.spec.volumes[{index}].nfs.'
                    f'{field}"'
                )
    return None


@pytest.mark.rabbitmq
async def test_an_actor_whose_deployment_the_server_refuses_is_degraded_with_its_words_until_fixed(
    world, broker_secret, operator, queues
):
    # Given: a server that refuses a misspelt field, as strict field validation does
    world.cluster.refuse(DEPLOYMENTS, _misspelt_nfs)

    # When: an actor names a free-form volume source with a misspelt field
    volume = {"name": "data", "nfs": {"serer": "nas", "path": "/data"}}
    await world.create_actor(async_actor("text", volumes=[volume]))

    # Then: Degraded with the server's words, in its status and a Warning Event
    refused = await world.wait_condition("text", "Degraded", "True")
    degraded = condition_of(refused, "Degraded")
    assert degraded["reason"] == "ApplyRefused"
    assert "Deployment text refused by the API server" in degraded["message"]
    assert "strict decoding error: unknown field" in degraded["message"]
    assert '.nfs.serer"' in degraded["message"]
    assert observed(refused) is None
    assert [reason for reason, _ in await warnings_about(world, "text")] == ["ApplyRefused"]

    # When: the field is corrected
    fixed = {"name": "data", "nfs": {"server": "nas", "path": "/data"}}
    await world.patch_actor("text", {"spec": {"volumes": [fixed]}})

    # Then: applied, and no longer Degraded
    applied = await world.wait_condition("text", "Degraded", "False")
    assert observed(applied) == applied["metadata"]["generation"]
    deployment = await world.wait_exists(DEPLOYMENTS, "text")
    assert fixed in deployment["spec"]["template"]["spec"]["volumes"]
