"""A ResourcePool's Active condition, written by the admission pass on the stand-in cluster:
False naming a flavor its quotas name that no ResourceFlavor has, True once they are fixed,
each time with the pool's generation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asya_operator.api.template import GROUP, VERSION

from tests.operator.controller_world import WAIT_S
from tests.operator.test_controller_admission import POOLS, pool_body

pytestmark = [pytest.mark.rabbitmq]


def active_of(pool: dict[str, Any] | None) -> dict[str, Any]:
    conditions = ((pool or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Active"), {})


async def test_a_pool_naming_a_missing_flavor_is_inactive_until_its_quotas_are_fixed(
    world, operator, quota
):
    create, patch = quota
    gpu = {"name": "nvidia.com/gpu", "nominal": 1}
    body = pool_body(2)
    body["spec"]["quotas"].append({"flavor": "a100", "resources": [gpu]})
    await create("resourcepools", body)

    async with asyncio.timeout(WAIT_S):
        pool = await world.cluster.wait_for(
            POOLS, None, "team-a", lambda p: active_of(p).get("status") == "False"
        )
    active = active_of(pool)
    assert active["reason"] == "FlavorNotFound"
    assert active["message"] == (
        "ResourceFlavor a100 not found: create it or remove it from spec.quotas"
    )
    assert active["observedGeneration"] == pool["metadata"]["generation"]

    await patch("resourcepools", "team-a", pool_body(2))

    async with asyncio.timeout(WAIT_S):
        pool = await world.cluster.wait_for(
            POOLS, None, "team-a", lambda p: active_of(p).get("status") == "True"
        )
    assert active_of(pool)["reason"] == "Ready"
    assert active_of(pool)["observedGeneration"] == pool["metadata"]["generation"]
    assert pool["status"]["observedGeneration"] == pool["metadata"]["generation"]


async def test_a_pool_whose_missing_flavor_is_created_becomes_active(world, operator, quota):
    create, _patch = quota
    gpu = {"name": "nvidia.com/gpu", "nominal": 1}
    body = pool_body(2)
    body["spec"]["quotas"].append({"flavor": "a100", "resources": [gpu]})
    await create("resourcepools", body)
    async with asyncio.timeout(WAIT_S):
        await world.cluster.wait_for(
            POOLS, None, "team-a", lambda p: active_of(p).get("status") == "False"
        )

    # The flavor is created (a flavor's event asks for a pass), and Active follows.
    flavor = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor"}
    await create("resourceflavors", {**flavor, "metadata": {"name": "a100"}, "spec": {}})

    async with asyncio.timeout(WAIT_S):
        pool = await world.cluster.wait_for(
            POOLS, None, "team-a", lambda p: active_of(p).get("status") == "True"
        )
    assert active_of(pool)["reason"] == "Ready"
