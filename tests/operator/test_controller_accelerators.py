"""A flavor whose nodes advertise no GPUs, on the stand-in cluster: the admission pass names it
in the status of a GPU actor, or a gang instance, it admitted there (their pods are not ready:
no kubelet runs them here), and `asya status --kubernetes` shows it; once the nodes advertise
GPUs, a later pass clears it. Quota stays quota: what is admitted stays admitted throughout."""

from __future__ import annotations

import asyncio
from typing import Any

import kubernetes
import pytest
from asya_operator.api.template import GROUP, VERSION

from tests.operator.controller_world import ACTORS, condition_of, observed
from tests.operator.test_controller_admission import admitted_become, gpu_actor
from tests.operator.test_controller_gangs import (
    gang,
    gpu_pool,
    group_becomes,
    instance,
)
from tests.operator.test_status_command import status_of

pytestmark = [pytest.mark.rabbitmq]

NO_GPUS = (
    "ResourceFlavor h100: its 2 Ready nodes advertise no allocatable nvidia.com/gpu"
    " (is the device plugin running?)"
)


def node(name: str, gpus: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"gpu": "h100"} if labels is None else labels},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": gpus},
        },
    }


def h100_pool() -> dict[str, Any]:
    gpus = {"name": "nvidia.com/gpu", "nominal": 4}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourcePool",
        "metadata": {"name": "team-a"},
        "spec": {"quotas": [{"flavor": "h100", "resources": [gpus]}]},
    }


def unavailable(actor: dict[str, Any] | None) -> dict[str, Any]:
    return condition_of(actor or {}, "AcceleratorsUnavailable")


async def test_a_flavor_whose_nodes_advertise_no_gpus_is_named_until_they_do(
    world, kube, broker_secret, operator, queues, quota
):
    create, _patch = quota
    core = kubernetes.client.CoreV1Api(kube)
    for name in ("gpu-1", "gpu-2"):
        await asyncio.to_thread(core.create_node, node(name, "0"))
    flavor = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor"}
    await create(
        "resourceflavors",
        {**flavor, "metadata": {"name": "h100"}, "spec": {"nodeLabels": {"gpu": "h100"}}},
    )
    await create("resourcepools", h100_pool())

    await world.create_actor(gpu_actor("text", replicas=2))

    actor = await world.wait_for(
        ACTORS, "text", lambda a: unavailable(a).get("status") == "True", "text names h100"
    )
    named = unavailable(actor)
    assert (named["reason"], named["message"]) == ("NoAllocatableAccelerators", NO_GPUS)
    assert actor["status"]["admittedReplicas"] == 2
    [row] = (await status_of(kube, "-n", world.namespace)).rows
    assert (row.name, row.admitted, row.why) == ("text", 2, NO_GPUS)

    # Reconciled: no handler of the actor's asks for a pass now; no Node change asks for one
    # either, so the pass that clears it is one the loop set itself.
    await world.wait_for(ACTORS, "text", lambda a: observed(a) == 1, "text reconciled")
    for name in ("gpu-1", "gpu-2"):
        patch = {"status": {"allocatable": {"nvidia.com/gpu": "2"}}}
        await asyncio.to_thread(core.patch_node, name, patch)

    actor = await world.wait_for(
        ACTORS, "text", lambda a: a is not None and not unavailable(a), "the condition gone"
    )
    await admitted_become(world, "text", 2)
    [row] = (await status_of(kube, "-n", world.namespace)).rows
    assert "ResourceFlavor h100" not in row.why


@pytest.fixture
async def gang_queues(queues):
    """The queues of the group of these tests go after the test."""
    yield queues
    await queues.delete_queues({"train-coordinator", "train-worker"})


async def test_a_gang_instance_waiting_for_readiness_names_its_members_flavor(
    world, kube, broker_secret, operator, gang_queues, quota
):
    create, _patch = quota
    core = kubernetes.client.CoreV1Api(kube)
    await asyncio.to_thread(core.create_node, node("node-1", "0", labels={}))
    await create("resourcepools", gpu_pool(2))

    await world.create_group(gang("train"))

    group = await group_becomes(
        world, "train", lambda g: condition_of(g, "AcceleratorsUnavailable"), "train names gpu"
    )
    named = condition_of(group, "AcceleratorsUnavailable")
    assert (named["status"], named["reason"]) == ("True", "NoAllocatableAccelerators")
    # The quota fixture's flavor gpu has no node labels: every node is its.
    assert named["message"] == (
        "instance 0, member worker: ResourceFlavor gpu: its 1 Ready node advertises no"
        " allocatable nvidia.com/gpu (is the device plugin running?)"
    )
    assert instance(group, 0)["phase"] == "WaitingForReady"
    [row] = (await status_of(kube, "-n", world.namespace)).rows
    assert row.why == named["message"]

    patch = {"status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    await asyncio.to_thread(core.patch_node, "node-1", patch)

    group = await group_becomes(
        world, "train", lambda g: not condition_of(g, "AcceleratorsUnavailable"), "cleared"
    )
    assert instance(group, 0)["phase"] == "WaitingForReady"
