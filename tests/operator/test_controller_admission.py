"""Admission in the loop, on the stand-in cluster: an AsyncActor with a pool runs the replicas
its pool's quota admits — KEDA proposes (spec.replicas), admission disposes (the Deployment).

The controller runs on kmock's emulator as in test_controller; the broker is real (queues are
declared as for any actor). Quota here is GPUs, a count like any other resource.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asya_operator.api.template import GROUP, VERSION

from tests.operator.controller_world import (
    ACTORS,
    DEPLOYMENTS,
    WAIT_S,
    async_actor,
    condition_of,
    observed,
)

pytestmark = [pytest.mark.rabbitmq, pytest.mark.usefixtures("quota_watch")]

POOLS = f"{GROUP}/{VERSION}/resourcepools"


def gpu_actor(name: str, *, replicas: int, priority: int = 0, pool: str = "team-a") -> dict:
    return async_actor(
        name,
        pool=pool,
        priority=priority,
        replicas=replicas,
        resources={"gpus": 1},
        scaling={"maxReplicas": 8},
    )


def pool_body(gpus: int, *, name: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourcePool",
        "metadata": {"name": name},
        "spec": {
            "quotas": [
                {"flavor": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominal": gpus}]}
            ],
            **spec,
        },
    }


async def replicas_become(world, name: str, count: int) -> dict[str, Any]:
    return await world.wait_for(
        DEPLOYMENTS,
        name,
        lambda d: d is not None and d["spec"]["replicas"] == count,
        f"Deployment {name} at {count} replicas",
    )


async def admitted_become(world, name: str, count: int) -> dict[str, Any]:
    return await world.wait_for(
        ACTORS,
        name,
        lambda a: a is not None and (a.get("status") or {}).get("admittedReplicas") == count,
        f"AsyncActor {name} with {count} admitted",
    )


async def test_an_elastic_actor_runs_what_its_pool_admits_and_no_more(
    world, broker_secret, operator, queues, quota
):
    create, patch = quota
    await create("resourcepools", pool_body(2))
    await world.create_actor(gpu_actor("text", replicas=5))

    actor = await admitted_become(world, "text", 2)
    await replicas_become(world, "text", 2)

    admitted = condition_of(actor, "Admitted")
    assert (admitted["status"], admitted["reason"]) == ("False", "Pending")
    assert "2 of 5 replicas admitted, 3 waiting" in admitted["message"]
    assert "nvidia.com/gpu" in admitted["message"]
    reserved = condition_of(actor, "QuotaReserved")
    assert reserved["status"] == "True"
    assert "2 replicas hold quota in flavor gpu of pool team-a" in reserved["message"]
    assert actor["status"]["admittedFlavor"] == "gpu"
    async with asyncio.timeout(WAIT_S):
        pool = await world.cluster.wait_for(
            POOLS,
            None,
            "team-a",
            lambda p: ((p or {}).get("status") or {}).get("admittedWorkloads") == 2,
        )
    assert pool["status"]["pendingWorkloads"] == 3
    (usage,) = pool["status"]["flavorsUsage"]
    assert usage == {
        "flavor": "gpu",
        "resources": [{"name": "nvidia.com/gpu", "usage": "2", "borrowed": "0", "lent": "0"}],
    }

    # More quota: more of what KEDA asks for runs.
    await patch("resourcepools", "team-a", pool_body(4))
    await admitted_become(world, "text", 4)
    await replicas_become(world, "text", 4)

    # KEDA asks for fewer: the rest is released at once.
    await world.patch_actor("text", {"spec": {"replicas": 1}})
    actor = await admitted_become(world, "text", 1)
    await replicas_become(world, "text", 1)
    assert condition_of(actor, "Admitted")["status"] == "True"


COHORTS = f"{GROUP}/{VERSION}/cohorts"


async def test_cohorts_show_what_their_subtree_uses_and_borrows(
    world, broker_secret, operator, queues, quota
):
    create, _patch = quota
    gpus = {"flavor": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominal": 2}]}
    await create("cohorts", {"metadata": {"name": "org"}, "spec": {"quotas": [gpus]}})
    await create("cohorts", {"metadata": {"name": "eng"}, "spec": {"parent": "org"}})
    await create("resourcepools", pool_body(1, cohort="eng"))
    await world.create_actor(gpu_actor("text", replicas=3))

    await admitted_become(world, "text", 3)

    def usage_of(cohort: dict[str, Any] | None) -> list[dict[str, Any]] | None:
        return ((cohort or {}).get("status") or {}).get("flavorsUsage")

    async def cohort_uses(name: str, used: str) -> list[dict[str, Any]] | None:
        async with asyncio.timeout(WAIT_S):
            cohort = await world.cluster.wait_for(
                COHORTS,
                None,
                name,
                lambda c: (usage_of(c) or [{}])[0].get("resources", [{}])[0].get("usage") == used,
            )
        return usage_of(cohort)

    # eng's subtree (team-a) has 1 GPU and uses 3: it borrows 2 from org, which owns them.
    assert await cohort_uses("eng", "3") == [
        {
            "flavor": "gpu",
            "resources": [{"name": "nvidia.com/gpu", "usage": "3", "borrowed": "2", "lent": "0"}],
        }
    ]
    assert await cohort_uses("org", "3") == [
        {
            "flavor": "gpu",
            "resources": [{"name": "nvidia.com/gpu", "usage": "3", "borrowed": "0", "lent": "0"}],
        }
    ]


async def test_a_higher_priority_actor_preempts_a_lower_ones_replicas_and_gives_them_back(
    world, broker_secret, operator, queues, quota
):
    create, _patch = quota
    await create("resourcepools", pool_body(2, preemption={"withinPool": "LowerPriority"}))
    await world.create_actor(gpu_actor("text", replicas=2))
    await replicas_become(world, "text", 2)

    await world.create_actor(gpu_actor("other", replicas=2, priority=10))

    await replicas_become(world, "other", 2)
    low = await admitted_become(world, "text", 0)
    await replicas_become(world, "text", 0)
    preempted = condition_of(low, "Preempted")
    assert (preempted["status"], preempted["reason"]) == ("True", "Preempted")
    assert f"{world.namespace}/other" in preempted["message"]

    await world.delete_actor("other")

    await admitted_become(world, "text", 2)
    await replicas_become(world, "text", 2)


async def test_an_actor_scaled_to_zero_gives_back_its_borrowed_gpus_before_the_waiting_one_grows(
    world, broker_secret, operator, queues, quota, quota_watch
):
    # Two pools of 2 GPUs in one cohort: text runs 4, two of them borrowed from team-b, and
    # other, in team-b, waits for them (no reclaim: it waits until text lets them go).
    create, _patch = quota
    await create("resourcepools", pool_body(2, cohort="gpus"))
    await create("resourcepools", pool_body(2, name="team-b", cohort="gpus"))
    await world.create_actor(gpu_actor("text", replicas=4))
    await replicas_become(world, "text", 4)
    await world.create_actor(gpu_actor("other", replicas=2, pool="team-b"))
    await world.wait_condition("other", "Admitted", "False")
    await world.wait_for(ACTORS, "other", lambda a: observed(a) == 1, "other reconciled")

    await world.patch_actor("text", {"spec": {"replicas": 0}})

    await replicas_become(world, "other", 2)
    await replicas_become(world, "text", 0)

    # And back: text wants 4 again and gets its own 2; other goes to zero, text takes the rest.
    await world.patch_actor("text", {"spec": {"replicas": 4}})
    await admitted_become(world, "text", 2)
    await replicas_become(world, "text", 2)
    await world.patch_actor("other", {"spec": {"replicas": 0}})

    await replicas_become(world, "text", 4)
    await replicas_become(world, "other", 0)
    # Never more than 4 GPUs of Deployments: each shrink was written before the grow it freed.
    assert quota_watch.violations == []


async def test_an_actor_naming_a_missing_pool_runs_nothing_and_says_why(
    world, broker_secret, operator, queues, quota
):
    await world.create_actor(gpu_actor("text", replicas=2, pool="no-such-pool"))

    actor = await world.wait_condition("text", "Admitted", "False")
    await replicas_become(world, "text", 0)

    assert "pool no-such-pool does not exist" in condition_of(actor, "Admitted")["message"]
    assert actor["status"]["admittedReplicas"] == 0


async def test_an_actor_that_leaves_its_pool_gives_its_quota_back_at_once(
    world, broker_secret, operator, queues, quota
):
    create, _patch = quota
    await create("resourcepools", pool_body(2))
    await world.create_actor(gpu_actor("text", replicas=2))
    await admitted_become(world, "text", 2)

    await world.patch_actor("text", {"spec": {"pool": None}})

    # A pass frees what it held (nothing else would start one), and its status says so.
    async with asyncio.timeout(WAIT_S):
        pool = await world.cluster.wait_for(
            POOLS,
            None,
            "team-a",
            lambda p: ((p or {}).get("status") or {}).get("admittedWorkloads") == 0,
        )
    assert pool["status"]["flavorsUsage"][0]["resources"][0]["usage"] == "0"
    left = await world.wait_for(
        ACTORS,
        "text",
        lambda a: a is not None and "admittedReplicas" not in (a.get("status") or {}),
        "its admitted count dropped",
    )
    assert "admittedFlavor" not in left["status"]
