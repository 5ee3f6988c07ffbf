"""Kueue as the admission (the operator's `admission: kueue`), on the stand-in cluster with the
stand-in Kueue (`standin_kueue`, test-only): an ActorGroup instance's member pods carry Kueue's
pod-group labels and wait at Kueue's gate until Kueue admits the group whole; then they run,
and asya's statuses say what Kueue decided. asya admits nothing itself: no ResourcePool
exists here, and the pool the group names is a Kueue LocalQueue."""

from __future__ import annotations

from typing import Any

import pytest

from tests.operator.controller_world import (
    ACTORS,
    DEPLOYMENTS,
    STATEFULSETS,
    async_actor,
    condition_of,
    operator_registry,
)
from tests.operator.emulator import register_crd
from tests.operator.standin_kueue import GATE, Kueue
from tests.operator.test_controller_gangs import gang, group_becomes, instance

pytestmark = [pytest.mark.rabbitmq]

PODS = "v1/pods"
WORKLOADS = "kueue.x-k8s.io/v1beta2/workloads"
# Only what discovery needs (the stand-in serves any body); Kueue's CRD is ../shared/schemas.
WORKLOAD_CRD = {
    "spec": {
        "group": "kueue.x-k8s.io",
        "scope": "Namespaced",
        "names": {"kind": "Workload", "plural": "workloads", "singular": "workload"},
        "versions": [{"name": "v1beta2", "subresources": {"status": {}}}],
    }
}


@pytest.fixture
def kueue_admits(world, monkeypatch) -> None:
    """The operator runs with Kueue admitting, and the stand-in serves Kueue's Workloads."""
    monkeypatch.setenv("ASYA_OPERATOR_ADMISSION", "kueue")
    register_crd(world.cluster, WORKLOAD_CRD)


@pytest.fixture
async def kueue(world, kueue_admits, kube):
    async with Kueue(kube.configuration.host, world.namespace, gpus=0) as running:
        yield running


@pytest.fixture
async def gang_queues(queues):
    yield queues
    await queues.delete_queues({"train-coordinator", "train-worker"})


def message_of(group: dict[str, Any]) -> str:
    instances = (group.get("status") or {}).get("instances") or ()
    return next((i.get("message") or "" for i in instances if i["instance"] == 0), "")


def pods_of(world, statefulset: str) -> list[dict[str, Any]]:
    return [
        p
        for p in world.cluster.stored(PODS)
        if p["metadata"]["namespace"] == world.namespace
        and p["metadata"]["labels"].get("owner-set") == statefulset
    ]


async def test_a_gangs_pods_wait_at_kueues_gate_until_kueue_admits_it_whole_then_run(
    world, kueue_admits, broker_secret, kueue, operator, gang_queues
):
    await world.create_group(gang("train", workers=2))  # its pool, team-a, is a LocalQueue

    # Every pod of the instance exists, in one Kueue pod group, held at Kueue's gate.
    workers = await world.wait_exists(STATEFULSETS, "train-worker-0")
    coordinator = await world.wait_exists(STATEFULSETS, "train-coordinator-0")
    for statefulset in (workers, coordinator):
        meta = statefulset["spec"]["template"]["metadata"]
        assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
        assert meta["labels"]["kueue.x-k8s.io/pod-group-name"] == "train-0"
        assert meta["labels"]["kueue.x-k8s.io/managed"] == "true"
        assert meta["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "3"
        # A parent suspends them: Kueue's StatefulSet webhook leaves them be, and the pods get
        # its gate but not its finalizer (a StatefulSet may replace an evicted pod).
        assert meta["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] == "asya"
        assert meta["annotations"]["kueue.x-k8s.io/pod-group-serving"] == "true"
        # Not the StatefulSet: Kueue's StatefulSet integration would make a group of each.
        assert "kueue.x-k8s.io/queue-name" not in statefulset["metadata"]["labels"]
    assert workers["spec"]["replicas"] == 2

    waiting = await group_becomes(
        world,
        "train",
        lambda g: "insufficient unused quota" in message_of(g),
        "the group's status says why Kueue has not admitted it",
    )
    assert instance(waiting, 0)["phase"] == "Pending"
    assert condition_of(waiting, "Admitted")["status"] == "False"
    assert "waiting for Kueue: couldn't assign flavors" in instance(waiting, 0)["message"]
    gated = pods_of(world, "train-worker-0") + pods_of(world, "train-coordinator-0")
    assert len(gated) == 3
    assert all(p["spec"]["schedulingGates"] == [{"name": GATE}] for p in gated)
    assert kueue.workloads_made == ["train-0"]

    kueue.gpus = 2  # quota frees in Kueue: it admits the group whole

    ready = await group_becomes(
        world,
        "train",
        lambda g: condition_of(g, "Ready").get("status") == "True",
        "the group Ready once Kueue admitted it and its pods run",
    )
    assert instance(ready, 0)["phase"] == "Ready"
    # A pod set per member (its role hash): each member's flavor as Kueue assigned it.
    flavors = {m["name"]: m["flavor"] for m in instance(ready, 0)["members"]}
    assert flavors == {"coordinator": "cpu", "worker": "gpu"}
    assert condition_of(ready, "Admitted")["status"] == "True"
    running = pods_of(world, "train-worker-0") + pods_of(world, "train-coordinator-0")
    assert all(not p["spec"].get("schedulingGates") for p in running)
    assert all(p["status"]["phase"] == "Running" for p in running)


def test_with_kueue_admitting_the_operator_watches_kueues_workloads(monkeypatch):
    monkeypatch.setenv("ASYA_OPERATOR_SIDECAR_IMAGE", "reg/sidecar:1")
    monkeypatch.setenv("ASYA_OPERATOR_ADMISSION", "kueue")
    kueue_ids = {h.id for h in operator_registry()._watching.get_all_handlers()}
    monkeypatch.setenv("ASYA_OPERATOR_ADMISSION", "builtin")
    builtin_ids = {h.id for h in operator_registry()._watching.get_all_handlers()}

    assert "follow_kueue_workload" in kueue_ids
    assert "follow_kueue_workload" not in builtin_ids  # no warning where Kueue is not used


async def test_without_kueue_installed_a_gang_is_degraded_and_runs_nothing_unadmitted(
    world, broker_secret, monkeypatch, run_operator, gang_queues
):
    monkeypatch.setenv("ASYA_OPERATOR_ADMISSION", "kueue")  # but no Workload kind is served
    await run_operator(operator_registry())
    await world.wait_for_watch("asya.sh/v1alpha1/actorgroups")
    await world.create_group(gang("train", workers=2))

    degraded = await group_becomes(
        world,
        "train",
        lambda g: condition_of(g, "Degraded").get("reason") == "KueueNotInstalled",
        "the group Degraded: Kueue is missing",
    )
    assert "Kueue is not installed" in condition_of(degraded, "Degraded")["message"]
    assert "Kueue is not installed" in message_of(degraded)
    # Nothing would gate its pods: none are made.
    assert world.cluster.current(STATEFULSETS, world.namespace, "train-worker-0") is None


def test_only_workloads_of_pods_wake_the_admission_loop():
    from asya_operator.handlers import groups as handlers

    of_pods = {"metadata": {"ownerReferences": [{"kind": "Pod", "name": "train-worker-0-0"}]}}
    of_a_job = {"metadata": {"ownerReferences": [{"kind": "Job", "name": "nightly"}]}}

    assert handlers._of_pods(body=of_pods)
    assert not handlers._of_pods(body=of_a_job)
    assert not handlers._of_pods(body={"metadata": {}})


async def test_an_actors_replicas_are_admitted_by_kueue_pod_by_pod_and_its_status_counts_them(
    world, kueue_admits, broker_secret, kueue, operator, queues
):
    kueue.gpus = 2  # room for two of its three replicas
    actor = async_actor("embed", pool="team-a", replicas=3, resources={"gpus": 1})
    await world.create_actor(actor)

    deployment = await world.wait_exists(DEPLOYMENTS, "embed")
    assert deployment["spec"]["replicas"] == 3  # every desired pod exists, gated by Kueue
    assert deployment["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"

    # Two admitted, and Kueue's words for the third: the Workload of the third pod says why
    # it waits a tick after the other two are admitted, and a pass may fall between.
    two = await world.wait_for(
        ACTORS,
        "embed",
        lambda a: (
            (a or {}).get("status", {}).get("admittedReplicas") == 2
            and "waiting for Kueue:" in condition_of(a or {}, "Admitted").get("message", "")
        ),
        "two replicas admitted by Kueue, read back, and why the third waits",
    )
    admitted = condition_of(two, "Admitted")
    assert admitted["status"] == "False"
    assert admitted["message"].startswith("2 of 3 replicas admitted by Kueue; waiting for Kueue:")
    assert two["status"]["admittedFlavor"] == "gpu"
    gated = [p for p in pods_of(world, "embed") if p["spec"].get("schedulingGates")]
    assert len(gated) == 1

    kueue.gpus = 3

    await world.wait_for(
        ACTORS,
        "embed",
        lambda a: condition_of(a or {}, "Admitted").get("status") == "True",
        "all three admitted once Kueue has room",
    )
