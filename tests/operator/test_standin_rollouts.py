"""A GPU actor rolls to a new image on a full pool without a pod beyond its admitted count.

On the cluster stand-in with real pods and the real broker: a pool with exactly as many GPUs as
the actor runs replicas (1, and 3), the actor at that count, envelopes in flight; its image
changes. The stand-in kubelet rolls the Deployment as Kubernetes' controller does
(`standin_kubelet`: surge and unavailable as the Deployment's strategy says) and records its
pods after every change: at no change do the actor's pods not being stopped number more than
the GPUs admitted (on a cluster, such a surge pod waits Pending for a GPU nobody has, and the
rollout stalls), every pod ends on the new template, and every envelope sent is served.
"""

from __future__ import annotations

import asyncio
import textwrap
from typing import Any

import kubernetes
import pytest
from asya_operator.api.template import GROUP, VERSION

from asya import Client
from asya.envelope import END_LIMITS, decode_envelope
from asya.transport.records import RecordKind
from tests.operator.controller_world import async_actor, operator_registry
from tests.operator.standin_kubelet import template_hash
from tests.operator.test_standin import (
    ACTORS,
    DEPLOYMENTS,
    WAIT_S,
    create_broker_secret,
    wait_for,
)

pytestmark = pytest.mark.usefixtures("quota_watch")

HANDLERS = """
import time
from asya import actor

@actor
def infer(doc):
    time.sleep(0.2)
    return doc
"""

ACTOR = "infer"
ENVELOPES = 20


def pool(gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourcePool",
        "metadata": {"name": "team"},
        "spec": {
            "quotas": [
                {"flavor": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominal": gpus}]}
            ]
        },
    }


def gpu_actor(replicas: int, image: str) -> dict[str, Any]:
    return async_actor(
        ACTOR,
        image=image,
        handler="standin_handlers:infer",
        pool="team",
        resources={"gpus": 1},
        scaling={"minReplicas": replicas, "maxReplicas": replicas, "pollingInterval": 1},
    )


@pytest.mark.timeout(240)
@pytest.mark.parametrize("replicas", [1, 3])
async def test_a_gpu_actor_on_a_full_pool_rolls_to_a_new_image_within_its_admitted_count(
    replicas,
    cluster,
    kube,
    kubelet,
    keda,
    run_operator,
    transport,
    namespace,
    amqp_url,
    actor_names,
    tmp_path,
):
    (tmp_path / "image" / "standin_handlers.py").write_text(textwrap.dedent(HANDLERS))
    actor_names.add(ACTOR)
    custom = kubernetes.client.CustomObjectsApi(kube)
    await create_broker_secret(kube, namespace, amqp_url)
    flavor = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor"}
    await asyncio.to_thread(
        custom.create_cluster_custom_object,
        GROUP,
        VERSION,
        "resourceflavors",
        {**flavor, "metadata": {"name": "gpu"}, "spec": {}},
    )
    await asyncio.to_thread(
        custom.create_cluster_custom_object, GROUP, VERSION, "resourcepools", pool(replicas)
    )
    await run_operator(operator_registry())

    # Given: the actor at `replicas` on a pool of exactly that many GPUs, every pod ready
    await asyncio.to_thread(
        custom.create_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        "asyncactors",
        gpu_actor(replicas, "registry.example.com/standin:1"),
    )
    first = await wait_for(
        cluster, DEPLOYMENTS, namespace, ACTOR, _replicas(replicas), "the actor's Deployment"
    )
    async with asyncio.timeout(WAIT_S):
        await kubelet.wait_until(_all_ready(kubelet, namespace, template_hash(first), replicas))
    rolled_from = len(kubelet.history)

    # When: envelopes are in flight and the actor's image changes
    client = Client(transport)
    sent = {await client.send([ACTOR], {"n": n}) for n in range(ENVELOPES)}
    await asyncio.to_thread(
        custom.patch_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        "asyncactors",
        ACTOR,
        {"spec": {"image": "registry.example.com/standin:2"}},
    )
    second = await wait_for(
        cluster, DEPLOYMENTS, namespace, ACTOR, _image_is("registry.example.com/standin:2"), "new"
    )
    new = template_hash(second)
    async with asyncio.timeout(2 * WAIT_S):
        await kubelet.wait_until(_all_ready(kubelet, namespace, new, replicas))

    # Then: at no change of its pods did the actor run more than its admitted GPUs
    during = [
        s
        for s in kubelet.history[rolled_from:]
        if (s.kind, s.namespace, s.name) == ("Deployment", namespace, ACTOR)
    ]
    assert during, "the rollout changed no pod"
    assert max(s.pods for s in during) <= replicas, [s.running for s in during]
    assert during[-1].running == {new: replicas}
    # ... and every envelope was served through the rollout
    results: set[str] = set()
    async with asyncio.timeout(4 * WAIT_S):
        async for record in transport.records.read(RecordKind.RESULTS, follow=True):
            results.add(decode_envelope(record.body, END_LIMITS).id)
            if sent <= results:
                break
    assert results == sent
    assert [r async for r in transport.records.read(RecordKind.FAILURES)] == []
    actor = cluster.current(ACTORS, namespace, ACTOR)
    assert int(actor["status"]["admittedReplicas"]) == replicas


def _replicas(count: int) -> Any:
    return lambda o: o is not None and o["spec"]["replicas"] == count


def _image_is(image: str) -> Any:
    def check(deployment: dict[str, Any] | None) -> bool:
        containers = (deployment or {}).get("spec", {}).get("template", {}).get("spec", {})
        return any(c.get("image") == image for c in containers.get("containers", ()))

    return check


def _all_ready(kubelet: Any, namespace: str, template: str, count: int) -> Any:
    def check() -> bool:
        pods = kubelet.pods(namespace, ACTOR)
        return len(pods) == count and all(p.ready and p.template == template for p in pods)

    return check
