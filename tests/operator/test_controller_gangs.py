"""Gangs in the admission loop, on the stand-in cluster: an ActorGroup instance is admitted whole
or waits whole, is preempted whole, and is evicted and requeued with backoff when its pods do
not become ready in time.

The controller runs on kmock's emulator as in test_controller_admission; no kubelet runs here,
so no pod ever becomes ready (what the readiness test relies on; the others never wait that
long). Quota is GPUs, a count like any other resource.
"""

from __future__ import annotations

from typing import Any

import pytest
from asya_operator.api.template import GROUP, VERSION

from tests.operator.controller_world import (
    GROUPS,
    SERVICES,
    STATEFULSETS,
    async_actor,
    condition_of,
    operator_registry,
)

pytestmark = [pytest.mark.rabbitmq, pytest.mark.usefixtures("quota_watch")]


def gpu_pool(gpus: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourcePool",
        "metadata": {"name": "team-a"},
        "spec": {
            "quotas": [
                {"flavor": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominal": gpus}]}
            ],
            **spec,
        },
    }


def gang(name: str, *, workers: int = 2, priority: int = 0, **spec: Any) -> dict[str, Any]:
    """A group of a coordinator (no GPU) and `workers` one-GPU workers."""
    template = {"image": "ghcr.io/acme/train:1", "handler": "train:step"}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ActorGroup",
        "metadata": {"name": name},
        "spec": {
            "pool": "team-a",
            "priority": priority,
            "readinessTimeoutSeconds": 600,
            "members": [
                {"name": "coordinator", "replicas": 1, "template": template},
                {
                    "name": "worker",
                    "replicas": workers,
                    "template": {**template, "resources": {"gpus": 1}},
                },
            ],
            **spec,
        },
    }


async def group_becomes(world, name: str, check, what: str) -> dict[str, Any]:
    return await world.wait_for(GROUPS, name, lambda g: g is not None and check(g), what)


def admitted(count: int):
    return lambda g: (g.get("status") or {}).get("admitted") == count


def instance(group: dict[str, Any], index: int) -> dict[str, Any]:
    (found,) = [i for i in group["status"]["instances"] if i["instance"] == index]
    return found


async def events_of(world, name: str) -> list[tuple[str, str, str]]:
    return [
        (e["type"], e["reason"], e["message"])
        for e in await world.events()
        if e["involved_object"]["name"] == name
    ]


@pytest.fixture
async def gang_queues(queues):
    """Every queue a group of these tests may have goes after the test."""
    yield queues
    await queues.delete_queues(
        {
            f"{group}-{member}"
            for group in ("train", "low", "high")
            for member in ("coordinator", "worker")
        }
    )


async def test_a_gang_that_does_not_fit_waits_whole_with_the_engines_message_then_runs_whole(
    world, broker_secret, operator, gang_queues, quota
):
    create, patch = quota
    await create("resourcepools", gpu_pool(1))

    await world.create_group(gang("train"))

    waiting = await group_becomes(
        world, "train", lambda g: condition_of(g, "Admitted").get("status") == "False", "pending"
    )
    message = condition_of(waiting, "Admitted")["message"]
    assert (
        "0 of 1 instances admitted; instance 0 waits: insufficient quota for nvidia.com/gpu"
        in message
    )
    assert world.cluster.current(STATEFULSETS, world.namespace, "train-worker-0") is None
    assert waiting["status"]["admitted"] == 0

    await patch("resourcepools", "team-a", gpu_pool(2))

    running = await group_becomes(world, "train", admitted(1), "admitted whole once quota frees")
    assert instance(running, 0)["phase"] == "WaitingForReady"
    assert condition_of(running, "QuotaReserved")["status"] == "True"
    workers = await world.wait_exists(STATEFULSETS, "train-worker-0")
    coordinator = await world.wait_exists(STATEFULSETS, "train-coordinator-0")
    assert (workers["spec"]["replicas"], coordinator["spec"]["replicas"]) == (2, 1)
    await world.wait_exists(SERVICES, "train-0")
    assert ("Normal", "Admitted") in [e[:2] for e in await events_of(world, "train")]


async def test_a_higher_priority_gang_preempts_a_lower_one_whole(
    world, broker_secret, operator, gang_queues, quota
):
    create, _patch = quota
    await create("resourcepools", gpu_pool(3, preemption={"withinPool": "LowerPriority"}))
    await world.create_group(gang("low", workers=3))
    await group_becomes(world, "low", admitted(1), "the low gang admitted")
    await world.wait_exists(STATEFULSETS, "low-worker-0")

    await world.create_group(gang("high", workers=2, priority=10))

    await group_becomes(world, "high", admitted(1), "the high gang admitted")
    low = await group_becomes(world, "low", admitted(0), "the low gang preempted")
    preempted = condition_of(low, "Preempted")
    assert (preempted["status"], preempted["reason"]) == ("True", "Preempted")
    assert f"preempted whole by {world.namespace}/high[0]" in preempted["message"]
    # Whole: none of its members' pods is left, its Service neither.
    for gone in ("low-worker-0", "low-coordinator-0"):
        await world.wait_for(STATEFULSETS, gone, lambda o: o is None, f"{gone} deleted")
    await world.wait_for(SERVICES, "low-0", lambda o: o is None, "low-0 deleted")
    await world.wait_exists(STATEFULSETS, "high-worker-0")
    warnings = [e for e in await events_of(world, "low") if e[:2] == ("Warning", "Preempted")]
    assert warnings, await events_of(world, "low")

    await world.delete_group("high")

    await group_becomes(world, "low", admitted(1), "the low gang admitted again")


async def test_a_gang_that_never_gets_ready_is_evicted_whole_requeued_with_backoff_then_deactivated(
    world, broker_secret, operator, gang_queues, quota
):
    create, _patch = quota
    await create("resourcepools", gpu_pool(2))
    requeuing = {"backoffBaseSeconds": 1, "backoffMaxSeconds": 1, "backoffLimitCount": 1}
    await world.create_group(gang("train", readinessTimeoutSeconds=1, requeuing=requeuing))
    await group_becomes(world, "train", admitted(1), "admitted")

    evicted = await group_becomes(
        world,
        "train",
        lambda g: any(i.get("phase") == "BackingOff" for i in g["status"].get("instances") or ()),
        "evicted for not becoming ready",
    )

    first = instance(evicted, 0)
    assert (first["evictions"], first.get("members")) == (1, None)
    assert "requeueAt" in first
    assert condition_of(evicted, "Evicted")["reason"] == "PodsReadyTimeout"
    await world.wait_for(STATEFULSETS, "train-worker-0", lambda o: o is None, "pods stopped")

    # Requeued after its 1 s backoff, admitted again, not ready again: past its limit of one
    # eviction it is deactivated, and stays out.
    gone = await group_becomes(
        world,
        "train",
        lambda g: instance(g, 0).get("phase") == "Deactivated",
        "deactivated after its second eviction",
    )
    assert instance(gone, 0)["evictions"] == 2
    reasons = [e[1] for e in await events_of(world, "train")]
    assert reasons.count("Admitted") == 2
    assert reasons.count("Evicted") == 1
    assert "Requeued" in reasons
    assert "Deactivated" in reasons

    await world.patch_group("train", {"metadata": {"annotations": {"asya.sh/reactivate": "1"}}})

    back = await group_becomes(world, "train", admitted(1), "reactivated and admitted")
    assert instance(back, 0)["evictions"] == 0
    assert back["status"]["reactivated"] == "1"


async def test_a_group_whose_member_name_an_actor_has_is_degraded_and_runs_nothing(
    world, broker_secret, operator, gang_queues, quota
):
    create, _patch = quota
    await create("resourcepools", gpu_pool(4))
    await world.create_actor(async_actor("train-worker"))

    await world.create_group(gang("train"))

    degraded = await group_becomes(
        world, "train", lambda g: condition_of(g, "Degraded").get("status") == "True", "Degraded"
    )
    assert condition_of(degraded, "Degraded")["reason"] == "NameTaken"
    assert world.cluster.current(STATEFULSETS, world.namespace, "train-worker-0") is None
    await world.delete_actor("train-worker")
    await world.wait_for(
        GROUPS,
        "train",
        lambda g: g is not None and condition_of(g, "Degraded").get("status") == "False",
        "no longer Degraded once the name is free",
    )
    await world.wait_exists(STATEFULSETS, "train-worker-0")


async def test_a_group_whose_secret_is_deleted_is_degraded_naming_it_and_recovers(
    world, broker_secret, operator, gang_queues, quota
):
    create, _patch = quota
    await create("resourcepools", gpu_pool(2))
    await world.create_group(gang("train"))
    await group_becomes(world, "train", admitted(1), "admitted")

    await world.delete_secret("asya-broker")

    degraded = await group_becomes(
        world,
        "train",
        lambda g: condition_of(g, "Degraded").get("status") == "True",
        "Degraded once its Secret is gone",
    )
    assert condition_of(degraded, "Degraded")["reason"] == "SecretNotFound"
    assert "asya-broker" in condition_of(degraded, "Degraded")["message"]
    # A Warning Event says so, posted before the status
    assert ("Warning", "SecretNotFound") in [e[:2] for e in await events_of(world, "train")]

    await world.create_secret("asya-broker", broker_secret)

    await group_becomes(
        world,
        "train",
        lambda g: condition_of(g, "Degraded").get("status") == "False",
        "recovered once its Secret is back",
    )


def test_only_the_secrets_a_group_names_wake_the_admission_loop():
    from asya_operator.handlers import groups as handlers

    index = {("ml", "asya-broker"): {"train"}}

    assert handlers._is_used(namespace="ml", name="asya-broker", groups_by_secret=index)
    assert not handlers._is_used(namespace="ml", name="other", groups_by_secret=index)
    assert not handlers._is_used(namespace="ml-a", name="asya-broker", groups_by_secret=index)


def test_the_operator_watches_the_secrets_groups_name(monkeypatch):
    monkeypatch.setenv("ASYA_OPERATOR_SIDECAR_IMAGE", "reg/sidecar:1")
    registry = operator_registry()

    # kopf keeps its handlers by kind of activity; their ids are ours (handlers/groups.py).
    watching = {h.id for h in registry._watching.get_all_handlers()}
    indexing = {h.id for h in registry._indexing.get_all_handlers()}
    assert "follow_group_secret" in watching
    assert "groups_by_secret" in indexing
