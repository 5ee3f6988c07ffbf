"""An admitted actor or gang instance whose pods are not ready, in a flavor whose nodes advertise
none of an accelerator it asks for: its status names the flavor (AcceleratorsUnavailable,
NoAllocatableAccelerators), and says nothing once the nodes advertise it or its pods are ready.
Admission's decisions are not touched: only what is reported."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
from asya_operator.api.group import ActorGroup, InstanceStatus, MemberAdmission
from asya_operator.plans.actor_status import (
    find_accelerator_shortage,
    plan_admission_status,
    plan_status,
)
from asya_operator.plans.group_status import find_group_shortage, plan_group_status
from asya_operator.plans.nodes import node_of
from asya_operator.plans.workloads import ActorAdmission

from asya.admission.readiness import GangPhase
from tests.operator.admission_crs import GROUP
from tests.operator.plan_builders import async_actor, resource_flavor

NOW = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
LATER = datetime(2026, 11, 26, 9, 5, tzinfo=UTC)
H100 = resource_flavor("h100", nodeLabels={"gpu": "h100"})
ADMITTED = ActorAdmission(
    admitted=2, flavor="h100", borrowing=False, message=None, preempted_by=None
)
NO_GPUS = (
    "ResourceFlavor h100: its 2 Ready nodes advertise no allocatable nvidia.com/gpu"
    " (is the device plugin running?)"
)


def nodes(gpus: str):
    return [
        node_of(
            {
                "metadata": {"name": name, "labels": {"gpu": "h100"}},
                "status": {
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "allocatable": {"nvidia.com/gpu": gpus},
                },
            }
        )
        for name in ("gpu-1", "gpu-2")
    ]


def gpu_actor(*, ready=0, conditions=None, gpus=1):
    status = {"admittedReplicas": 2, "admittedFlavor": "h100", "readyReplicas": ready}
    if conditions is not None:
        status["conditions"] = conditions
    return async_actor(
        pool="team-a",
        replicas=2,
        resources={"gpus": gpus},
        scaling={"maxReplicas": 8},
        status=status,
    )


def by_type(status):
    return {c["type"]: c for c in status["conditions"]}


def test_an_admitted_gpu_actor_whose_flavors_nodes_advertise_no_gpu_names_the_flavor():
    actor = gpu_actor()

    shortage = find_accelerator_shortage(actor, ADMITTED, H100, nodes("0"))
    status = plan_admission_status(actor, ADMITTED, now=NOW, shortage=shortage).document()

    unavailable = by_type(status)["AcceleratorsUnavailable"]
    assert (unavailable["status"], unavailable["reason"]) == ("True", "NoAllocatableAccelerators")
    assert unavailable["message"] == NO_GPUS
    # Quota stays quota: what is admitted is unchanged.
    assert (status["admittedReplicas"], status["admittedFlavor"]) == (2, "h100")
    assert by_type(status)["QuotaReserved"]["status"] == "True"


def test_the_condition_goes_once_the_nodes_advertise_gpus():
    before = plan_admission_status(
        gpu_actor(),
        ADMITTED,
        now=NOW,
        shortage=find_accelerator_shortage(gpu_actor(), ADMITTED, H100, nodes("0")),
    ).document()
    actor = gpu_actor(conditions=before["conditions"])

    shortage = find_accelerator_shortage(actor, ADMITTED, H100, nodes("2"))
    patch = plan_admission_status(actor, ADMITTED, now=LATER, shortage=shortage)

    assert shortage is None
    assert "AcceleratorsUnavailable" not in by_type(patch.document())
    assert patch.changed(actor.status)


def test_nothing_is_named_when_its_pods_are_ready_it_asks_for_no_gpu_or_nodes_are_unknown():
    assert find_accelerator_shortage(gpu_actor(ready=2), ADMITTED, H100, nodes("0")) is None
    assert find_accelerator_shortage(gpu_actor(gpus=0), ADMITTED, H100, nodes("0")) is None
    assert find_accelerator_shortage(gpu_actor(), ADMITTED, H100, None) is None
    assert find_accelerator_shortage(gpu_actor(), ADMITTED, None, nodes("0")) is None
    waiting = ActorAdmission(
        admitted=0, flavor=None, borrowing=False, message="no quota", preempted_by=None
    )
    assert find_accelerator_shortage(gpu_actor(), waiting, H100, nodes("0")) is None


def test_the_actors_own_status_writer_keeps_the_condition_until_every_replica_is_ready():
    named = plan_admission_status(
        gpu_actor(),
        ADMITTED,
        now=NOW,
        shortage=find_accelerator_shortage(gpu_actor(), ADMITTED, H100, nodes("0")),
    ).document()
    actor = gpu_actor(conditions=named["conditions"])

    pending = plan_status(
        actor, {"replicas": 2, "readyReplicas": 0}, [], observed_generation=None, now=LATER
    )
    ready = plan_status(
        actor, {"replicas": 2, "readyReplicas": 2}, [], observed_generation=None, now=LATER
    )

    assert by_type(pending.document())["AcceleratorsUnavailable"]["message"] == NO_GPUS
    assert "AcceleratorsUnavailable" not in by_type(ready.document())


def gang(*, ready: bool):
    group = msgspec.convert(GROUP, ActorGroup)
    members = [MemberAdmission(name="worker", flavor="h100", replicas=4)]
    phase = GangPhase.READY if ready else GangPhase.WAITING_FOR_READY
    states = {0: InstanceStatus(instance=0, phase=phase, members=members)}
    return group, states, {0: ready}


def test_a_gang_instance_waiting_for_readiness_names_its_members_flavor():
    group, states, ready = gang(ready=False)

    shortage = find_group_shortage(group, states, ready, {"h100": H100}, nodes("0"))
    status = plan_group_status(group, states, ready, [], now=NOW, shortage=shortage).document()

    unavailable = by_type(status)["AcceleratorsUnavailable"]
    assert (unavailable["status"], unavailable["reason"]) == ("True", "NoAllocatableAccelerators")
    assert unavailable["message"] == f"instance 0, member worker: {NO_GPUS}"


def test_a_ready_gang_or_nodes_with_gpus_name_nothing():
    group, states, ready = gang(ready=True)
    assert find_group_shortage(group, states, ready, {"h100": H100}, nodes("0")) is None
    group, states, ready = gang(ready=False)
    assert find_group_shortage(group, states, ready, {"h100": H100}, nodes("4")) is None
    assert find_group_shortage(group, states, ready, {"h100": H100}, None) is None

    status = plan_group_status(group, states, ready, [], now=NOW, shortage=None).document()

    assert "AcceleratorsUnavailable" not in by_type(status)
