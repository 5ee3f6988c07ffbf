"""A gang handed to Volcano, on the stand-in cluster: each admitted instance gets exactly one
PodGroup, which goes with the instance (preempted, deleted); what Volcano says of an instance
it cannot place whole is in the group's status.

No Volcano runs here: the test writes the PodGroup's status as Volcano's scheduler would
(the condition `Unschedulable`), and the stand-in serves Volcano's PodGroup kind from its CRD
(tests/operator/schemas/).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import yaml
from asya_operator.handlers.groups import GroupHandlers
from kubernetes.client import CustomObjectsApi

from tests.operator.controller_world import STATEFULSETS, condition_of, operator_registry
from tests.operator.emulator import register_crd
from tests.operator.plan_builders import SCHEMAS
from tests.operator.test_controller_gangs import admitted, gang, gpu_pool, group_becomes, instance
from tests.operator.test_status_command import status_of

pytestmark = [pytest.mark.rabbitmq, pytest.mark.usefixtures("quota_watch")]

VOLCANO_GROUPS = "scheduling.volcano.sh/v1beta1/podgroups"
VOLCANO = {"scheduling": {"gangScheduler": "volcano", "queue": "team-a"}}
UNSCHEDULABLE = (
    "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable;"
    " Pending: 3 Unschedulable"
)


@pytest.fixture
def volcano(world) -> None:
    """The stand-in serves Volcano's PodGroups (before the operator starts: kopf finds them)."""
    crd = yaml.safe_load((SCHEMAS / "scheduling.volcano.sh_podgroups.yaml").read_text("utf-8"))
    register_crd(world.cluster, crd)


@pytest.fixture
async def gang_queues(queues):
    yield queues
    await queues.delete_queues(
        {f"{group}-{member}" for group in ("low", "high") for member in ("coordinator", "worker")}
    )


def pod_groups(world) -> list[str]:
    return sorted(
        g["metadata"]["name"]
        for g in world.cluster.stored(VOLCANO_GROUPS)
        if g["metadata"]["namespace"] == world.namespace
    )


async def test_each_admitted_instance_has_one_volcano_pod_group_that_goes_with_it(
    world, volcano, broker_secret, operator, gang_queues, quota
):
    create, _patch = quota
    await create("resourcepools", gpu_pool(3, preemption={"withinPool": "LowerPriority"}))
    await world.create_group(gang("low", workers=2, **VOLCANO))
    await group_becomes(world, "low", admitted(1), "the low gang admitted")

    pod_group = await world.wait_exists(VOLCANO_GROUPS, "low-0")
    assert pod_group["spec"]["minMember"] == 3  # a coordinator and 2 workers
    assert pod_group["spec"]["queue"] == "team-a"
    assert pod_group["spec"]["minResources"]["nvidia.com/gpu"] == "2"
    workers = await world.wait_exists(STATEFULSETS, "low-worker-0")
    template = workers["spec"]["template"]
    assert template["spec"]["schedulerName"] == "volcano"
    assert template["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "low-0"
    assert pod_groups(world) == ["low-0"]

    # A gang of higher priority preempts it: its PodGroup goes with its pods.
    await world.create_group(gang("high", workers=2, priority=10, **VOLCANO))
    await group_becomes(world, "high", admitted(1), "the high gang admitted")
    await group_becomes(world, "low", admitted(0), "the low gang preempted")
    await world.wait_for(VOLCANO_GROUPS, "low-0", lambda o: o is None, "low-0 PodGroup deleted")
    await world.wait_exists(VOLCANO_GROUPS, "high-0")
    assert pod_groups(world) == ["high-0"]

    # Deleted with its group.
    await world.delete_group("high")
    await world.wait_for(VOLCANO_GROUPS, "high-0", lambda o: o is None, "high-0 PodGroup deleted")
    await group_becomes(world, "low", admitted(1), "the low gang admitted again")
    await world.wait_exists(VOLCANO_GROUPS, "low-0")
    assert pod_groups(world) == ["low-0"]


async def test_what_volcano_says_of_a_gang_it_cannot_place_is_in_the_groups_status(
    world, volcano, broker_secret, operator, gang_queues, quota, kube
):
    create, _patch = quota
    await create("resourcepools", gpu_pool(2))
    await world.create_group(gang("low", workers=2, **VOLCANO))
    await group_becomes(world, "low", admitted(1), "admitted")
    await world.wait_exists(VOLCANO_GROUPS, "low-0")

    await set_volcano_condition(kube, world.namespace, "low-0", "True", UNSCHEDULABLE)

    said = f"volcano cannot place it whole: {UNSCHEDULABLE}"
    waiting = await group_becomes(
        world,
        "low",
        lambda g: condition_of(g, "PodsReady").get("reason") == "GangNotPlaced",
        "the group's status says why Volcano does not place it",
    )
    assert instance(waiting, 0)["message"] == said
    assert said in condition_of(waiting, "PodsReady")["message"]
    assert condition_of(waiting, "Ready")["reason"] == "GangNotPlaced"
    # And `asya status` says it on the group's row.
    report = await status_of(kube, "-n", world.namespace)
    [row] = [r for r in report.rows if r.name == "low"]
    assert said in row.why

    # Placed after all (the nodes freed up): Volcano adds Scheduled and runs it, leaving
    # Unschedulable as it was; the reason goes.
    await set_volcano_placed(kube, world.namespace, "low-0")

    placed = await group_becomes(
        world,
        "low",
        lambda g: condition_of(g, "PodsReady").get("reason") == "PodsNotReady",
        "the reason cleared once Volcano no longer says it",
    )
    assert instance(placed, 0).get("message") is None


UNSCHEDULABLE_CONDITION = {
    "type": "Unschedulable",
    "status": "True",
    "reason": "NotEnoughResources",
    "message": UNSCHEDULABLE,
    "transitionID": "1",
    "lastTransitionTime": "2026-11-26T10:00:00Z",
}


async def set_volcano_condition(kube, namespace: str, name: str, status: str, message: str):
    condition = {**UNSCHEDULABLE_CONDITION, "status": status, "message": message}
    await patch_pod_group(kube, namespace, name, {"phase": "Pending", "conditions": [condition]})


async def set_volcano_placed(kube, namespace: str, name: str):
    placed = {
        "type": "Scheduled",
        "status": "True",
        "reason": "tasks in gang are ready to be scheduled",
        "transitionID": "2",
        "lastTransitionTime": "2026-11-26T10:05:00Z",
    }
    status = {"phase": "Running", "conditions": [UNSCHEDULABLE_CONDITION, placed]}
    await patch_pod_group(kube, namespace, name, status)


async def patch_pod_group(kube, namespace: str, name: str, status: dict[str, Any]):
    body = {"status": status}
    custom = CustomObjectsApi(kube)
    await asyncio.to_thread(
        custom.patch_namespaced_custom_object,
        "scheduling.volcano.sh",
        "v1beta1",
        namespace,
        "podgroups",
        name,
        body,
        _content_type="application/merge-patch+json",
    )


def test_the_operator_watches_each_gang_schedulers_pod_groups_of_its_gangs(monkeypatch):
    monkeypatch.setenv("ASYA_OPERATOR_SIDECAR_IMAGE", "reg/sidecar:1")
    registry = operator_registry()

    watching = {h.id: h for h in registry._watching.get_all_handlers()}
    for scheduler in ("kubernetes", "volcano", "kai"):
        handler = watching[f"follow_{scheduler}_pod_group"]
        # Only the PodGroups the operator made for its gangs.
        assert handler.labels == {
            "app.kubernetes.io/managed-by": "asya-operator",
            "app.kubernetes.io/component": "actor-group",
        }


async def test_a_pod_group_changing_asks_for_an_admission_pass():
    asked: list[str] = []

    class Loop:
        def request(self) -> int:
            asked.append("pass")
            return 1

    handlers = GroupHandlers(groups=None, admission=Loop())  # type: ignore[arg-type]

    await handlers.follow_gang_object(event={"type": "MODIFIED", "object": {}})
    await handlers.follow_gang_object(event={"type": "DELETED", "object": {}})

    assert asked == ["pass"]  # a PodGroup deleted is the pass's own doing: nothing to report


async def test_a_group_naming_a_scheduler_the_cluster_lacks_is_degraded_and_runs_nothing(
    world, volcano, broker_secret, operator, gang_queues, quota
):
    create, _patch = quota
    await create("resourcepools", gpu_pool(4))
    # KAI is not installed: the stand-in serves no scheduling.run.ai PodGroups.
    await world.create_group(gang("low", workers=2, scheduling={"gangScheduler": "kai"}))
    # Others go on being admitted and applied meanwhile: one group cannot stall the pass.
    await world.create_group(gang("high", workers=1, **VOLCANO))

    degraded = await group_becomes(
        world,
        "low",
        lambda g: condition_of(g, "Degraded").get("status") == "True",
        "Degraded for want of its scheduler",
    )
    found = condition_of(degraded, "Degraded")
    assert found["reason"] == "GangSchedulerMissing"
    assert found["message"] == (
        "gang scheduler kai: the cluster serves no PodGroups of scheduling.run.ai/v2alpha2:"
        " install it, or set spec.scheduling.gangScheduler (none: the default scheduler)"
    )
    await world.wait_exists(VOLCANO_GROUPS, "high-0")
    await world.wait_exists(STATEFULSETS, "high-worker-0")
    assert world.cluster.current(STATEFULSETS, world.namespace, "low-worker-0") is None


async def test_a_group_whose_gang_scheduler_changes_restarts_its_instances_whole(
    world, volcano, broker_secret, operator, gang_queues, quota
):
    create, _patch = quota
    await create("resourcepools", gpu_pool(2))
    await world.create_group(gang("low", workers=2, **VOLCANO))
    await group_becomes(world, "low", admitted(1), "admitted")
    before = await world.wait_exists(STATEFULSETS, "low-worker-0")
    assert before["metadata"]["labels"]["asya.sh/gang-scheduler"] == "volcano"
    await world.wait_exists(VOLCANO_GROUPS, "low-0")

    # Pods replaced one by one would each wait for a gang Volcano can no longer complete.
    none = {"gangScheduler": "none", "queue": None}
    await world.patch_group("low", {"spec": {"scheduling": none}})

    after = await world.wait_for(
        STATEFULSETS,
        "low-worker-0",
        lambda s: s is not None and s["metadata"]["uid"] != before["metadata"]["uid"],
        "the StatefulSet made anew, not patched",
    )
    assert after["metadata"]["labels"]["asya.sh/gang-scheduler"] == "none"
    assert "schedulerName" not in after["spec"]["template"]["spec"]
    await world.wait_for(VOLCANO_GROUPS, "low-0", lambda o: o is None, "its PodGroup gone")
    again = await world.wait_exists(STATEFULSETS, "low-coordinator-0")
    assert again["metadata"]["labels"]["asya.sh/gang-scheduler"] == "none"
