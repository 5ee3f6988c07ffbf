"""An ActorGroup's Ready condition: not Degraded, every desired instance admitted, every
admitted instance's pods ready; False names the first of these that fails."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest
from asya_operator.api.group import ActorGroup, InstanceStatus, MemberAdmission
from asya_operator.plans.conditions import Problem, Reason
from asya_operator.plans.group_status import plan_group_status

from asya.admission.readiness import GangPhase
from tests.operator.admission_crs import GROUP, changed

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
MEMBERS = [MemberAdmission(name="worker", flavor="h100", replicas=4)]
RUNNING = InstanceStatus(instance=0, phase=GangPhase.READY, members=MEMBERS)
STARTING = InstanceStatus(instance=0, phase=GangPhase.WAITING_FOR_READY, members=MEMBERS)
WAITING = InstanceStatus(instance=1, message="insufficient quota for nvidia.com/gpu")
NO_SECRET = Problem(Reason.SECRET_NOT_FOUND, "Secret ml-b/asya-broker not found: create it")


def group(replicas: int, generation: int = 4) -> ActorGroup:
    body = changed(GROUP, spec__replicas=replicas, metadata__generation=generation)
    return msgspec.convert(body, ActorGroup)


def ready_of(status) -> tuple[str, str, str]:
    (ready,) = [c for c in status["conditions"] if c["type"] == "Ready"]
    return ready["status"], ready["reason"], ready["message"]


@pytest.mark.parametrize(
    ("replicas", "instances", "ready", "problems", "expected"),
    [
        (1, {0: RUNNING}, {0: True}, [], ("True", "InstancesReady", "1 of 1 instances ready")),
        (0, {}, {}, [], ("True", "ScaledToZero", "no instances wanted")),
        (
            2,
            {0: RUNNING, 1: WAITING},
            {0: True},
            [],
            (
                "False",
                "Pending",
                "1 of 2 instances admitted; instance 1 waits: insufficient quota for"
                " nvidia.com/gpu",
            ),
        ),
        (1, {}, {}, [], ("False", "Pending", "0 of 1 instances admitted")),
        (
            1,
            {0: STARTING},
            {},
            [],
            (
                "False",
                "PodsNotReady",
                "instances 0 not ready yet (each evicted whole if not ready 300 s after its"
                " admission)",
            ),
        ),
        (
            1,
            {0: RUNNING},
            {0: True},
            [NO_SECRET],
            (
                "False",
                "SecretNotFound",
                "not ready: Secret ml-b/asya-broker not found: create it",
            ),
        ),
    ],
    ids=[
        "all-ready",
        "none-wanted",
        "instance-waits",
        "none-known-yet",
        "pods-starting",
        "degraded",
    ],
)
def test_ready_says_whether_the_group_runs_what_it_asks_for_and_else_why_not(
    replicas, instances, ready, problems, expected
):
    status = plan_group_status(group(replicas), instances, ready, problems, now=NOW).document()

    assert ready_of(status) == expected


def test_every_condition_carries_the_generation_it_was_set_from():
    status = plan_group_status(group(1, generation=7), {0: RUNNING}, {0: True}, [], now=NOW)

    generations = {c["type"]: c["observedGeneration"] for c in status.document()["conditions"]}
    assert set(generations) == {
        "Ready",
        "QuotaReserved",
        "Admitted",
        "PodsReady",
        "Preempted",
        "Evicted",
        "Degraded",
    }
    assert set(generations.values()) == {7}


def test_a_new_generation_alone_is_a_status_worth_writing():
    before = plan_group_status(group(1, generation=7), {0: RUNNING}, {0: True}, [], now=NOW)
    stored = msgspec.convert(changed(GROUP, status=before.document()), ActorGroup).status

    same = plan_group_status(group(1, generation=7), {0: RUNNING}, {0: True}, [], now=NOW)
    bumped = plan_group_status(group(1, generation=8), {0: RUNNING}, {0: True}, [], now=NOW)

    assert not same.changed(stored)
    assert bumped.changed(stored)
