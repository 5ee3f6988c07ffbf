"""The cluster client on the stand-in cluster: what a namespaced operator's admission reads."""

from __future__ import annotations

import asyncio

from asya_operator.api.template import GROUP, VERSION
from asya_operator.kube import Kube
from kubernetes.client import CustomObjectsApi

from tests.operator.test_controller_admission import gpu_actor, pool_body


async def test_a_namespaced_client_reads_the_admission_world_of_its_namespace_only(
    world, quota, kube
):
    create, _patch = quota
    await create("resourcepools", pool_body(4))
    custom = CustomObjectsApi(kube)
    other = f"{world.namespace}-other"
    await world.create_actor(gpu_actor("mine", replicas=1))
    await asyncio.to_thread(
        custom.create_namespaced_custom_object,
        GROUP,
        VERSION,
        other,
        "asyncactors",
        gpu_actor("theirs", replicas=1),
    )
    client = Kube(world.namespace)
    await client.connect()

    scoped = await client.admission_world()
    everything = await Kube().admission_world()

    assert [(ns, a.metadata["name"]) for ns, a in scoped.actors] == [(world.namespace, "mine")]
    assert {(ns, a.metadata["name"]) for ns, a in everything.actors} == {
        (world.namespace, "mine"),
        (other, "theirs"),
    }
    assert [p.metadata["name"] for p in scoped.pools] == ["team-a"]
