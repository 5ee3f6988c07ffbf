"""plan_group_status: an ActorGroup's instances desired, admitted and ready, and its conditions
in words: QuotaReserved, Admitted, PodsReady, Preempted, Evicted, Degraded."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
from asya_operator.api.group import ActorGroup, InstanceStatus, MemberAdmission
from asya_operator.plans.group_status import find_group_problems, plan_group_status
from asya_operator.plans.names import Claim

from asya.admission.readiness import GangPhase
from tests.operator.admission_crs import GROUP, changed

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
MEMBERS = [MemberAdmission(name="worker", flavor="h100", replicas=4)]


def group(replicas: int = 2, **changes) -> ActorGroup:
    return msgspec.convert(changed(GROUP, spec__replicas=replicas, **changes), ActorGroup)


def conditions(status) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}


def test_a_partly_admitted_group_counts_its_instances_and_says_why_the_rest_wait():
    states = {
        0: InstanceStatus(instance=0, phase=GangPhase.READY, members=MEMBERS),
        1: InstanceStatus(instance=1, message="insufficient quota for nvidia.com/gpu"),
    }

    status = plan_group_status(group(), states, {0: True}, [], now=NOW).document()

    assert (status["desired"], status["admitted"], status["ready"]) == (2, 1, 1)
    assert status["replicas"] == 1
    assert status["selector"] == "app.kubernetes.io/component=actor-group,asya.sh/group=ddp"
    found = conditions(status)
    assert found["QuotaReserved"] == (
        "True",
        "QuotaReserved",
        "1 instances hold quota in pool team-b",
    )
    assert found["Admitted"] == (
        "False",
        "Pending",
        "1 of 2 instances admitted; instance 1 waits: insufficient quota for nvidia.com/gpu",
    )
    assert found["PodsReady"][0] == "True"
    assert [i["instance"] for i in status["instances"]] == [0, 1]


def test_an_admitted_instance_not_yet_ready_says_it_is_evicted_if_not_ready_in_time():
    states = {0: InstanceStatus(instance=0, phase=GangPhase.WAITING_FOR_READY, members=MEMBERS)}

    found = conditions(plan_group_status(group(replicas=1), states, {}, [], now=NOW).document())

    assert found["PodsReady"] == (
        "False",
        "PodsNotReady",
        "instances 0 not ready yet (each evicted whole if not ready 300 s after its admission)",
    )
    assert found["Admitted"][0] == "True"


def test_a_preempted_instance_names_its_preemptor_and_an_evicted_one_its_backoff():
    states = {
        0: InstanceStatus(instance=0, preempted_by="ml-a/urgent[0]", message="no room"),
        1: InstanceStatus(
            instance=1, phase=GangPhase.BACKING_OFF, evictions=1, message="evicted whole, ..."
        ),
    }

    found = conditions(plan_group_status(group(), states, {}, [], now=NOW).document())

    assert found["Preempted"] == (
        "True",
        "Preempted",
        "instance 0 preempted whole by ml-a/urgent[0]: no room",
    )
    assert found["Evicted"] == ("True", "PodsReadyTimeout", "instance 1 evicted whole, ...")
    assert found["QuotaReserved"][0] == "False"


def test_a_condition_that_did_not_change_keeps_its_transition_time():
    states = {0: InstanceStatus(instance=0, phase=GangPhase.READY, members=MEMBERS)}
    first = plan_group_status(group(replicas=1), states, {0: True}, [], now=NOW).document()
    before = group(replicas=1, status={"conditions": first["conditions"]})

    later = plan_group_status(before, states, {0: True}, [], now=NOW.replace(hour=13)).document()

    assert later["conditions"] == first["conditions"]


def test_a_member_named_as_an_existing_actor_and_a_missing_secret_leave_it_degraded():
    problems = find_group_problems(
        group(),
        "ml-b",
        secret_keys=None,
        missing_flavors={"h100"},
        keepers={"ddp-worker": Claim("AsyncActor", "ddp-worker")},
    )

    status = plan_group_status(group(), {}, {}, problems, now=NOW).document()

    degraded = conditions(status)["Degraded"]
    assert degraded[:2] == ("True", "SecretNotFound")
    assert "Secret ml-b/asya-broker not found" in degraded[2]
    assert "ResourceFlavor h100 not found" in degraded[2]
    assert (
        "member worker runs as actor ddp-worker, which AsyncActor ml-b/ddp-worker already runs as"
        in degraded[2]
    )


def test_the_reactivation_asked_for_is_recorded_as_acted_on():
    asked = group(metadata__annotations={"asya.sh/reactivate": "2026-11-25"})

    assert plan_group_status(asked, {}, {}, [], now=NOW).document()["reactivated"] == "2026-11-25"
