"""Gangs on the cluster stand-in, with real pods and the real broker: an ActorGroup instance runs
whole (every member's pods started together, each told its rank), is preempted whole by a
higher-priority group mid-stream (its pods drain, their envelopes go back to the queues), and
runs again when the quota frees; every envelope sent is served.

The controller, the stand-in kubelet (StatefulSets too) and the broker run as in the other
stand-in tests; the test creates only the user's objects and sends envelopes. Quota: three GPUs,
a count like any other resource. The handlers return their pod's place in the gang
(`asya.gang.membership`), so the results show what each pod was told.
"""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from asya_operator.api.template import GROUP, VERSION

from asya import Client
from asya.envelope import END_LIMITS, decode_envelope
from asya.transport.records import RecordKind
from tests.operator.controller_world import GROUPS, STATEFULSETS, condition_of, operator_registry
from tests.operator.test_standin import WAIT_S, create_broker_secret, wait_for

# Whatever runs, at every write of a Deployment or StatefulSet, fits the quota.
pytestmark = pytest.mark.usefixtures("quota_watch")

HANDLERS = """
import os
import time
from asya import actor
from asya.gang import membership

def place(doc):
    time.sleep(0.3)
    me = membership(os.environ)
    return {**doc, "member": me.member, "rank": me.rank, "size": me.size, "group": me.group}

train_leader = actor(name="train-leader")(place)
train_worker = actor(name="train-worker")(lambda doc: place(doc))
urgent_solo = actor(name="urgent-solo")(lambda doc: place(doc))
serve_leader = actor(name="serve-leader")(lambda doc: place(doc))
serve_worker = actor(name="serve-worker")(lambda doc: place(doc))
"""


def gang(name: str, members: dict[str, int], *, priority: int = 0, **spec: Any) -> dict[str, Any]:
    """A group whose members each ask one GPU per replica; handler `<group>_<member>`."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ActorGroup",
        "metadata": {"name": name},
        "spec": {
            "pool": "gpus",
            "priority": priority,
            "readinessTimeoutSeconds": 120,
            "members": [
                {
                    "name": member,
                    "replicas": replicas,
                    "template": {
                        "image": "registry.example.com/standin:1",
                        "handler": f"standin_handlers:{name}_{member}",
                        "resources": {"gpus": 1},
                    },
                }
                for member, replicas in members.items()
            ],
            **spec,
        },
    }


POOL = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "ResourcePool",
    "metadata": {"name": "gpus"},
    "spec": {
        "preemption": {"withinPool": "LowerPriority"},
        "quotas": [{"flavor": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominal": 3}]}],
    },
}


async def gpus_for_gangs(
    cluster, kube, run_operator, namespace: str, amqp_url: str, tmp_path: Path
) -> Any:
    """The user's side of both tests: the handlers in the image, the broker Secret, the GPU
    flavor and pool; then the operator, running. A client for custom objects, back."""
    (tmp_path / "image" / "standin_handlers.py").write_text(textwrap.dedent(HANDLERS))
    custom = kubernetes.client.CustomObjectsApi(kube)
    await create_broker_secret(kube, namespace, amqp_url)
    flavor = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceFlavor",
        "metadata": {"name": "gpu"},
    }
    for plural, body in (("resourceflavors", {**flavor, "spec": {}}), ("resourcepools", POOL)):
        await asyncio.to_thread(custom.create_cluster_custom_object, GROUP, VERSION, plural, body)
    await run_operator(operator_registry())
    await cluster.watched(GROUPS)
    return custom


def runtime_environ(pod: Any) -> dict[str, str]:
    """The environment the stand-in kubelet started a pod's runtime process with."""
    raw = Path(f"/proc/{pod.processes['runtime'].pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


async def served(transport: Any, ids: set[str]) -> dict[str, dict[str, Any]]:
    """Every final payload the namespace's results hold, once they hold all of `ids`."""
    finals: dict[str, dict[str, Any]] = {}
    try:
        async with asyncio.timeout(4 * WAIT_S):
            async for record in transport.records.read(RecordKind.RESULTS, follow=True):
                envelope = decode_envelope(record.body, END_LIMITS)
                finals[envelope.id] = envelope.payload
                if ids <= set(finals):
                    return finals
    except TimeoutError:
        pass
    pytest.fail(f"{len(ids - set(finals))} of {len(ids)} envelopes not served")


def status_of(group: dict[str, Any] | None) -> dict[str, Any]:
    return (group or {}).get("status") or {}


# Longer than the suite's 60 s where the machine is busy: eight pods started, three stopped.
@pytest.mark.timeout(180)
async def test_a_gang_runs_whole_with_its_ranks_is_preempted_whole_and_every_envelope_is_served(
    cluster,
    kube,
    kubelet,
    run_operator,
    transport,
    namespace,
    amqp_url,
    actor_names,
    tmp_path,
):
    actor_names.update({"train-leader", "train-worker", "urgent-solo"})
    custom = await gpus_for_gangs(cluster, kube, run_operator, namespace, amqp_url, tmp_path)

    async def create_group(body: dict[str, Any]) -> None:
        await asyncio.to_thread(
            custom.create_namespaced_custom_object, GROUP, VERSION, namespace, "actorgroups", body
        )

    # 1. The gang: one leader and two workers, three GPUs, all of the pool's.
    await create_group(gang("train", {"leader": 1, "worker": 2}))
    running = await wait_for(
        cluster,
        GROUPS,
        namespace,
        "train",
        lambda g: status_of(g).get("ready") == 1 and bool(status_of(g).get("observedGeneration")),
        "the gang admitted whole, every pod ready, its queues declared",
    )
    assert condition_of(running, "PodsReady")["status"] == "True"
    workers = kubelet.pods(namespace, "train-worker-0", "StatefulSet")
    assert [p.name for p in workers] == ["train-worker-0-0", "train-worker-0-1"]
    ranks = {
        p.name: runtime_environ(p)["ASYA_GROUP_MEMBER_INDEX"]
        for p in [*kubelet.pods(namespace, "train-leader-0", "StatefulSet"), *workers]
    }
    assert ranks == {"train-leader-0-0": "0", "train-worker-0-0": "0", "train-worker-0-1": "1"}

    client = Client(transport)
    sent = {
        await client.send([member], {"n": n})
        for n in range(6)
        for member in ("train-leader", "train-worker")
    }

    # 2. Mid-stream, a higher-priority group takes two GPUs: the gang cannot keep three, so it
    # is preempted whole (all its pods stop, none is kept for a partial gang).
    await create_group(gang("urgent", {"solo": 2}, priority=10))
    await wait_for(
        cluster,
        GROUPS,
        namespace,
        "urgent",
        lambda g: bool(status_of(g).get("observedGeneration")),
        "the urgent group's queues declared",
    )
    urgent = {await client.send(["urgent-solo"], {"n": n}) for n in range(2)}
    sent |= urgent
    preempted = await wait_for(
        cluster,
        GROUPS,
        namespace,
        "train",
        lambda g: condition_of(g or {}, "Preempted").get("status") == "True",
        "the gang preempted whole",
    )
    assert f"{namespace}/urgent[0]" in condition_of(preempted, "Preempted")["message"]
    for gone in ("train-leader-0", "train-worker-0"):
        await wait_for(cluster, STATEFULSETS, namespace, gone, lambda o: o is None, f"{gone} gone")
    await kubelet.wait_until(lambda: not kubelet.pods(namespace, "train-worker-0", "StatefulSet"))

    # 3. The urgent group is done (its envelopes served) and deleted: the gang runs again and
    # serves the rest.
    await served(transport, urgent)
    await asyncio.to_thread(
        custom.delete_namespaced_custom_object, GROUP, VERSION, namespace, "actorgroups", "urgent"
    )
    await wait_for(
        cluster, GROUPS, namespace, "train", lambda g: status_of(g).get("ready") == 1, "back"
    )

    finals = await served(transport, sent)
    assert set(finals) == sent
    places = {(p["group"], p["member"], p["rank"], p["size"]) for p in finals.values()}
    assert places <= {
        ("train", "leader", 0, 3),
        ("train", "worker", 1, 3),
        ("train", "worker", 2, 3),
        ("urgent", "solo", 0, 2),
        ("urgent", "solo", 1, 2),
    }
    assert ("train", "leader", 0, 3) in places


@pytest.mark.timeout(180)
async def test_keda_proposes_gang_instances_from_the_entry_queue_and_admission_disposes(
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
    """A group that scales: KEDA sets its instances from its first member's queue depth, the
    pool admits what fits (one instance of two GPUs out of three), no pod of the instance left
    waiting is ever made, every envelope is served, and at the end the group is back to zero."""
    actor_names.update({"serve-leader", "serve-worker"})
    custom = await gpus_for_gangs(cluster, kube, run_operator, namespace, amqp_url, tmp_path)
    scaling = {
        "minReplicas": 0,
        "maxReplicas": 2,
        "queueLength": 2,
        "pollingInterval": 1,
        "cooldownPeriod": 2,
    }
    body = gang("serve", {"leader": 1, "worker": 1}, scaling=scaling)
    await asyncio.to_thread(
        custom.create_namespaced_custom_object, GROUP, VERSION, namespace, "actorgroups", body
    )
    await wait_for(
        cluster,
        GROUPS,
        namespace,
        "serve",
        lambda g: bool(status_of(g).get("observedGeneration")),
        "the group's queues declared, at zero instances",
    )

    client = Client(transport)
    sent = {await client.send(["serve-leader"], {"n": n}) for n in range(16)}

    # KEDA sees 16 queued at zero instances and asks for its most, two; the pool has GPUs for
    # one (two of its three), so one is admitted and the other waits, with no pod of its own.
    wanted = await wait_for(
        cluster,
        GROUPS,
        namespace,
        "serve",
        lambda g: (
            (g or {}).get("spec", {}).get("replicas") == 2 and status_of(g).get("admitted") == 1
        ),
        "KEDA asks for two instances and the pool admits one",
    )
    assert "1 of 2 instances admitted" in condition_of(wanted, "Admitted")["message"]
    assert cluster.current(STATEFULSETS, namespace, "serve-leader-1") is None
    assert cluster.current(STATEFULSETS, namespace, "serve-worker-1") is None

    finals = await served(transport, sent)
    assert {(p["member"], p["rank"], p["size"]) for p in finals.values()} == {("leader", 0, 2)}

    await wait_for(
        cluster,
        GROUPS,
        namespace,
        "serve",
        lambda g: (
            (g or {}).get("spec", {}).get("replicas") == 0 and status_of(g).get("admitted") == 0
        ),
        "back to zero instances once the queue is idle",
    )
    await wait_for(cluster, STATEFULSETS, namespace, "serve-leader-0", lambda o: o is None, "gone")


@pytest.mark.timeout(180)
async def test_a_running_gang_changed_in_image_restarts_whole_never_old_and_new_ranks_at_once(
    cluster,
    kube,
    kubelet,
    run_operator,
    transport,
    namespace,
    amqp_url,
    actor_names,
    tmp_path,
):
    actor_names.update({"train-leader", "train-worker"})
    custom = await gpus_for_gangs(cluster, kube, run_operator, namespace, amqp_url, tmp_path)
    body = gang("train", {"leader": 1, "worker": 2})
    await asyncio.to_thread(
        custom.create_namespaced_custom_object, GROUP, VERSION, namespace, "actorgroups", body
    )
    # Given: the instance running whole, every pod ready, envelopes in flight
    await wait_for(
        cluster,
        GROUPS,
        namespace,
        "train",
        lambda g: status_of(g).get("ready") == 1 and bool(status_of(g).get("observedGeneration")),
        "the gang running whole",
    )
    members = ("train-leader-0", "train-worker-0")
    old = {cluster.current(STATEFULSETS, namespace, m)["metadata"]["uid"] for m in members}
    since = len(kubelet.history)
    client = Client(transport)
    sent = {
        await client.send([member], {"n": n})
        for member in ("train-leader", "train-worker")
        for n in range(6)
    }

    # When: the worker member's image changes
    body["spec"]["members"][1]["template"]["image"] = "registry.example.com/standin:2"
    patch = {"spec": {"members": body["spec"]["members"]}}
    await asyncio.to_thread(
        custom.patch_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        "actorgroups",
        "train",
        patch,
    )

    # Then: the instance's StatefulSets are made anew and every pod runs from them
    def made_anew() -> bool:
        found = [cluster.current(STATEFULSETS, namespace, m) for m in members]
        uids = {f["metadata"]["uid"] for f in found if f is not None}
        pods = [p for m in members for p in kubelet.pods(namespace, m, "StatefulSet")]
        return (
            len(uids) == 2
            and not uids & old
            and len(pods) == 3
            and all(p.ready and p.owner in uids for p in pods)
        )

    async with asyncio.timeout(2 * WAIT_S):
        await kubelet.wait_until(made_anew)
    # ... and at no change of the instance's pods did old and new ranks run together
    state: dict[str, set[str]] = {}
    mixed = []
    for snapshot in kubelet.history[since:]:
        if snapshot.namespace == namespace and snapshot.name in members:
            state[snapshot.name] = set(snapshot.owners)
            owners = set().union(*state.values())
            if owners & old and owners - old:
                mixed.append({name: sorted(uids) for name, uids in state.items()})
    assert mixed == []
    worker = cluster.current(STATEFULSETS, namespace, "train-worker-0")
    assert worker["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert worker["spec"]["template"]["spec"]["containers"][0]["image"].endswith("standin:2")
    # ... under the same admission, every envelope served
    group = cluster.current(GROUPS, namespace, "train")
    assert status_of(group).get("admitted") == 1
    finals = await served(transport, sent)
    assert set(finals) >= sent
