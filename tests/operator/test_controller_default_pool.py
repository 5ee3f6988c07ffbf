"""Quota that cannot be skipped, on the stand-in cluster: an actor without `spec.pool` in a
namespace labelled `asya.sh/default-pool` is admitted by that pool like any pooled actor, and
with `ASYA_OPERATOR_REQUIRE_POOL_FOR_ACCELERATORS` one asking for GPUs in no pool (an
AsyncActor, or an ActorGroup member) runs nothing and is Degraded, saying how to fix it.

The controller runs on kmock's emulator as in test_controller_admission; the broker is real.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes.client import CoreV1Api

from tests.operator.controller_world import (
    ACTORS,
    DEPLOYMENTS,
    GROUPS,
    STATEFULSETS,
    WAIT_S,
    async_actor,
    condition_of,
    observed,
)
from tests.operator.test_controller_admission import (
    POOLS,
    admitted_become,
    pool_body,
    replicas_become,
)
from tests.operator.test_controller_gangs import gang

pytestmark = [pytest.mark.rabbitmq, pytest.mark.usefixtures("quota_watch")]


def pool_less_gpu_actor(name: str, *, replicas: int) -> dict[str, Any]:
    return async_actor(name, replicas=replicas, resources={"gpus": 1}, scaling={"maxReplicas": 8})


@pytest.fixture
async def train_queues(queues):
    """The queues of the group `train` go after the test too."""
    yield queues
    await queues.delete_queues({"train-coordinator", "train-worker"})


@pytest.fixture
def require_pool(monkeypatch, world) -> None:
    """The operator (started after this) refuses GPUs in no pool."""
    monkeypatch.setenv("ASYA_OPERATOR_REQUIRE_POOL_FOR_ACCELERATORS", "true")


async def label_namespace(world, kube, pool: str) -> None:
    """Label the test's namespace with `pool` as its default. The stand-in serves no Namespaces
    (kmock reads `/api/v1/namespaces/N` as namespace N), so the read the operator makes of it
    is answered as a real API server would."""
    labels = {"asya.sh/default-pool": pool, "kubernetes.io/metadata.name": world.namespace}
    body = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": world.namespace, "labels": labels},
    }
    world.cluster[f"get /api/v1/namespaces/{world.namespace}"] << body
    found = await asyncio.to_thread(CoreV1Api(kube).read_namespace, world.namespace)
    assert found.metadata is not None
    assert found.metadata.labels == labels


@pytest.fixture
async def default_pool(world, kube) -> str:
    """The test's namespace, labelled with pool team-a as its default."""
    await label_namespace(world, kube, "team-a")
    return "team-a"


async def test_a_pool_less_gpu_actor_is_degraded_and_runs_nothing_when_a_pool_is_required(
    world, broker_secret, require_pool, operator, queues, quota
):
    await world.create_actor(pool_less_gpu_actor("text", replicas=2))

    actor = await world.wait_condition("text", "Degraded", "True")

    degraded = condition_of(actor, "Degraded")
    assert degraded["reason"] == "PoolRequired"
    assert "asks for 1 nvidia.com/gpu per replica and has no pool" in degraded["message"]
    assert (
        f"set spec.pool, or label namespace {world.namespace} asya.sh/default-pool=<pool>"
        in degraded["message"]
    )
    assert condition_of(actor, "Ready")["status"] == "False"
    assert world.cluster.current(DEPLOYMENTS, world.namespace, "text") is None
    assert (actor.get("status") or {}).get("observedGeneration") is None


async def test_a_pool_less_gpu_actor_is_admitted_by_its_namespaces_default_pool(
    world, broker_secret, default_pool, require_pool, operator, queues, quota
):
    create, _patch = quota
    await create("resourcepools", pool_body(2, name=default_pool))

    await world.create_actor(pool_less_gpu_actor("text", replicas=5))

    await admitted_become(world, "text", 2)
    await replicas_become(world, "text", 2)
    actor = await world.wait_for(ACTORS, "text", lambda a: observed(a) == 1, "text applied")
    reserved = condition_of(actor, "QuotaReserved")
    assert "2 replicas hold quota in flavor gpu of pool team-a" in reserved["message"]
    assert condition_of(actor, "Degraded")["status"] == "False"
    async with asyncio.timeout(WAIT_S):
        pool = await world.cluster.wait_for(
            POOLS,
            None,
            "team-a",
            lambda p: ((p or {}).get("status") or {}).get("admittedWorkloads") == 2,
        )
    assert pool["status"]["pendingWorkloads"] == 3
    # Its stored spec is left as written: the pool is the namespace's, not the actor's.
    stored = world.cluster.current(ACTORS, world.namespace, "text")
    assert stored is not None
    assert "pool" not in stored["spec"]


async def test_labelling_a_namespace_brings_its_running_pool_less_actor_under_quota(
    world, kube, broker_secret, operator, queues, quota
):
    await world.create_actor(pool_less_gpu_actor("text", replicas=5))
    await replicas_become(world, "text", 5)

    await label_namespace(world, kube, "team-a")
    create, _patch = quota
    await create("resourcepools", pool_body(2))  # a pool's change asks for a pass

    actor = await admitted_become(world, "text", 2)
    await replicas_become(world, "text", 2)
    reserved = condition_of(actor, "QuotaReserved")
    assert "2 replicas hold quota in flavor gpu of pool team-a" in reserved["message"]


async def test_a_pool_less_gpu_group_is_degraded_and_runs_nothing_when_a_pool_is_required(
    world, broker_secret, require_pool, operator, train_queues, quota
):
    body = gang("train")
    del body["spec"]["pool"]

    await world.create_group(body)

    group = await world.wait_for(
        GROUPS,
        "train",
        lambda g: g is not None and condition_of(g, "Degraded").get("status") == "True",
        "ActorGroup train Degraded",
    )
    degraded = condition_of(group, "Degraded")
    assert degraded["reason"] == "PoolRequired"
    assert "asks for 2 nvidia.com/gpu per instance and has no pool" in degraded["message"]
    assert world.cluster.current(STATEFULSETS, world.namespace, "train-worker-0") is None
    assert world.cluster.current(STATEFULSETS, world.namespace, "train-coordinator-0") is None


async def test_a_pool_less_group_is_admitted_whole_by_its_namespaces_default_pool(
    world, broker_secret, default_pool, require_pool, operator, train_queues, quota
):
    create, _patch = quota
    await create("resourcepools", pool_body(2, name=default_pool))
    body = gang("train")
    del body["spec"]["pool"]

    await world.create_group(body)

    group = await world.wait_for(
        GROUPS,
        "train",
        lambda g: g is not None and (g.get("status") or {}).get("admitted") == 1,
        "ActorGroup train admitted",
    )
    reserved = condition_of(group, "QuotaReserved")
    assert reserved["message"] == "1 instances hold quota in pool team-a"
    workers = await world.wait_exists(STATEFULSETS, "train-worker-0")
    assert workers["spec"]["replicas"] == 2
