"""Quota that cannot be skipped, on the stand-in cluster: an actor without `spec.pool` in a
namespace labelled `asya.sh/default-pool` is admitted by that pool like any pooled actor, and
with `ASYA_OPERATOR_REQUIRE_POOL_FOR_ACCELERATORS` one asking for GPUs in no pool (an
AsyncActor, or an ActorGroup member) runs nothing and is Degraded, saying how to fix it.

The label is watched: adding, changing or removing it moves the namespace's pool-less actors
into a pool, to another or out of quota, with no other change.

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
    operator_registry,
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


NAMESPACES = "v1/namespaces"


@pytest.fixture
def no_recheck(monkeypatch, world) -> None:
    """A Degraded actor is not tried again during the test (kopf's retry, every recheck_s,
    would pick up its namespace's label by itself)."""
    monkeypatch.setenv("ASYA_OPERATOR_RECHECK_S", "3600")


async def label_namespace(world, kube, pool: str | None) -> None:
    """Set the test's namespace's default pool (None: remove the label), creating the
    Namespace if it is not there yet."""
    core = CoreV1Api(kube)
    labels = {"asya.sh/default-pool": pool}
    if world.cluster.current(NAMESPACES, None, world.namespace) is None:
        body = {"metadata": {"name": world.namespace, "labels": _without_none(labels)}}
        await asyncio.to_thread(core.create_namespace, body)
    else:
        await asyncio.to_thread(
            core.patch_namespace, world.namespace, {"metadata": {"labels": labels}}
        )
    found = await asyncio.to_thread(core.read_namespace, world.namespace)
    assert found.metadata is not None
    assert (found.metadata.labels or {}).get("asya.sh/default-pool") == pool


def _without_none(labels: dict[str, str | None]) -> dict[str, str]:
    return {key: value for key, value in labels.items() if value is not None}


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


async def test_labelling_a_namespace_admits_its_degraded_pool_less_actor_and_unlabelling_refuses_it(
    world, kube, broker_secret, require_pool, no_recheck, operator, queues, quota
):
    create, _patch = quota
    await create("resourcepools", pool_body(2))
    await label_namespace(world, kube, None)
    await world.create_actor(pool_less_gpu_actor("text", replicas=5))
    await world.wait_condition("text", "Degraded", "True")
    # Past the operator's first list of Namespaces: what follows reaches it as a change.
    await world.wait_for_watch(NAMESPACES)

    await label_namespace(world, kube, "team-a")

    # Nothing else changes: the label alone has the actor applied, in team-a's quota.
    actor = await world.wait_for(ACTORS, "text", lambda a: observed(a) == 1, "text applied")
    assert actor["status"]["admittedReplicas"] == 2
    assert condition_of(actor, "Degraded")["status"] == "False"
    reserved = condition_of(actor, "QuotaReserved")
    assert "2 replicas hold quota in flavor gpu of pool team-a" in reserved["message"]
    await replicas_become(world, "text", 2)

    await label_namespace(world, kube, None)

    # In no pool again: Degraded for want of one, its quota given back.
    refused = await world.wait_for(
        ACTORS,
        "text",
        lambda a: a is not None and condition_of(a, "Degraded").get("reason") == "PoolRequired",
        "text Degraded, PoolRequired",
    )
    assert condition_of(refused, "Degraded")["status"] == "True"
    async with asyncio.timeout(WAIT_S):
        await world.cluster.wait_for(
            POOLS,
            None,
            "team-a",
            lambda p: ((p or {}).get("status") or {}).get("admittedWorkloads") == 0,
        )


async def test_unlabelling_a_namespace_runs_its_pool_less_actor_outside_quota_again(
    world, kube, broker_secret, default_pool, operator, queues, quota
):
    create, _patch = quota
    await create("resourcepools", pool_body(2, name=default_pool))
    await world.create_actor(pool_less_gpu_actor("text", replicas=5))
    await world.wait_for(ACTORS, "text", lambda a: observed(a) == 1, "text applied")
    await replicas_become(world, "text", 2)
    await world.wait_for_watch(NAMESPACES)

    await label_namespace(world, kube, None)

    # Nothing else changes: it runs every desired replica, and holds no quota.
    await replicas_become(world, "text", 5)
    left = await world.wait_for(
        ACTORS,
        "text",
        lambda a: a is not None and "admittedReplicas" not in (a.get("status") or {}),
        "its admitted count dropped",
    )
    assert "admittedFlavor" not in left["status"]
    async with asyncio.timeout(WAIT_S):
        await world.cluster.wait_for(
            POOLS,
            None,
            "team-a",
            lambda p: ((p or {}).get("status") or {}).get("admittedWorkloads") == 0,
        )


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


async def test_an_operator_serving_one_namespace_follows_that_namespaces_label(
    world, kube, broker_secret, default_pool, run_operator, queues, quota
):
    # Namespaces are cluster-scoped: kopf watches them cluster-wide even so.
    await run_operator(operator_registry(world.namespace), namespace=world.namespace)
    await world.wait_for_watch(ACTORS)
    create, _patch = quota
    await create("resourcepools", pool_body(2, name=default_pool))
    await world.create_actor(pool_less_gpu_actor("text", replicas=5))
    await world.wait_for(ACTORS, "text", lambda a: observed(a) == 1, "text applied")
    await replicas_become(world, "text", 2)
    await world.wait_for_watch(NAMESPACES)

    await label_namespace(world, kube, None)

    await replicas_become(world, "text", 5)
