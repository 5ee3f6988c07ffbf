"""Kueue admitting (`admission: kueue`): the labels Kueue's contract asks for on the objects
asya makes (its pod-group and queue labels, as Kueue's own constants spell them), and Kueue's
Workloads read back into instance and actor admission."""

from __future__ import annotations

import re

import msgspec
import pytest
import yaml
from asya_operator.api.group import ActorGroup, InstanceStatus
from asya_operator.config import OperatorConfig
from asya_operator.plans.actor_objects import plan_deployment
from asya_operator.plans.actor_status import kueue_admission
from asya_operator.plans.group_objects import plan_group
from asya_operator.plans.kueue import actor_workloads, instance_from_workload

from asya.admission.readiness import GangPhase
from tests.operator.plan_builders import async_actor
from tests.operator.test_plan_gangs import GROUP_YAML

KUEUE = OperatorConfig(admission="kueue")
# Kueue's pod integration (pkg/controller/jobs/pod/constants) and its queue label.
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def group(pool: str | None = "team-b") -> ActorGroup:
    body = yaml.safe_load(GROUP_YAML.format(scheduling=f"pool: {pool}" if pool else ""))
    body["metadata"]["namespace"] = "ml-b"
    return msgspec.convert(body, ActorGroup)


def workload(*conditions: tuple[str, str, str], flavors: dict[str, str] | None = None) -> dict:
    status: dict = {
        "conditions": [{"type": t, "status": s, "message": m} for t, s, m in conditions]
    }
    if flavors is not None:  # a pod set per member: its role hash is the member's name
        status["admission"] = {
            "clusterQueue": "team-b",
            "podSetAssignments": [
                {"name": member, "flavors": flavors} for member in ("leader", "worker")
            ],
        }
    return {"metadata": {"name": "ddp-0"}, "status": status}


def test_every_instance_runs_whole_as_one_kueue_pod_group_in_its_pools_local_queue():
    running = {0: {"leader": (None, 1), "worker": (None, 3)}}

    planned = plan_group(group(), "ml-b", running, {}, KUEUE)

    sets = [o for o in planned if o["kind"] == "StatefulSet"]
    assert [s["spec"]["replicas"] for s in sets] == [1, 3]
    for statefulset in sets:
        meta = statefulset["spec"]["template"]["metadata"]
        assert meta["labels"][QUEUE_LABEL] == "team-b"
        assert meta["labels"][GROUP_NAME_LABEL] == "ddp-0"
        assert DNS_SUBDOMAIN.match(meta["labels"][GROUP_NAME_LABEL])  # Kueue's name rule
        assert meta["annotations"][TOTAL_COUNT_ANNOTATION] == "4"
        assert meta["labels"]["kueue.x-k8s.io/managed"] == "true"
        assert meta["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] == "asya"
        assert meta["annotations"]["kueue.x-k8s.io/pod-group-serving"] == "true"
        member = statefulset["metadata"]["labels"]["asya.sh/member"]
        assert meta["annotations"]["kueue.x-k8s.io/role-hash"] == member
        assert QUEUE_LABEL not in statefulset["metadata"]["labels"]


def test_under_asyas_own_admission_nothing_of_kueues_is_on_the_objects():
    running = {0: {"leader": (None, 1), "worker": (None, 3)}}

    planned = plan_group(group(), "ml-b", running, {}, OperatorConfig())

    for statefulset in (o for o in planned if o["kind"] == "StatefulSet"):
        assert not any(
            k.startswith("kueue.x-k8s.io/")
            for k in statefulset["spec"]["template"]["metadata"]["labels"]
        )


def test_an_actors_deployment_runs_every_desired_replica_in_its_local_queue():
    actor = async_actor("embed", pool="team-a", replicas=3)  # admitted: none yet

    deployment = plan_deployment(actor, "ml-a", None, KUEUE)
    builtin = plan_deployment(actor, "ml-a", None, OperatorConfig())
    without_pool = plan_deployment(async_actor("embed", replicas=3), "ml-a", None, KUEUE)

    assert deployment["spec"]["replicas"] == 3  # Kueue gates the pods it has not admitted
    assert deployment["metadata"]["labels"][QUEUE_LABEL] == "team-a"
    assert builtin["spec"]["replicas"] == 0  # asya creates no pod only to wait for quota
    assert QUEUE_LABEL not in builtin["metadata"]["labels"]
    # No pool: Kueue's own defaulting (its `default` LocalQueue, where one exists).
    assert QUEUE_LABEL not in without_pool["metadata"]["labels"]


@pytest.mark.parametrize(
    ("found", "ready", "phase", "words"),
    [
        (None, False, GangPhase.PENDING, "waiting for Kueue: no Workload ddp-0 yet"),
        # Ready with no Workload: Kueue does not manage the namespace, and the status says so.
        (None, True, GangPhase.READY, "running without Kueue's admission: Kueue made no"),
        (
            workload(("QuotaReserved", "False", "insufficient unused quota for nvidia.com/gpu")),
            False,
            GangPhase.PENDING,
            "waiting for Kueue: insufficient unused quota for nvidia.com/gpu",
        ),
        (
            workload(
                ("QuotaReserved", "False", "requeued"),
                ("Evicted", "True", "exceeded the PodsReady timeout"),
            ),
            False,
            GangPhase.PENDING,
            "evicted by Kueue: exceeded the PodsReady timeout",
        ),
        (
            workload(("Admitted", "True", "admitted"), flavors={"nvidia.com/gpu": "h100"}),
            False,
            GangPhase.WAITING_FOR_READY,
            None,
        ),
        (
            workload(("Admitted", "True", "admitted"), flavors={"nvidia.com/gpu": "h100"}),
            True,
            GangPhase.READY,
            None,
        ),
    ],
)
def test_an_instance_is_what_its_workload_says(found, ready, phase, words):
    shown = instance_from_workload(group(), InstanceStatus(instance=0), found, ready=ready)

    assert shown.phase is phase
    if phase is GangPhase.READY and words is not None:
        assert shown.message is not None
        assert shown.message.startswith(words)
    elif words is None:
        assert shown.message is None
        assert [(m.name, m.flavor, m.replicas) for m in shown.members or ()] == [
            ("leader", "h100", 1),
            ("worker", "h100", 3),
        ]
    else:
        assert shown.message is not None
        assert shown.message.startswith(words)
        assert shown.members is None


def owned_by(pod: str, *conditions: tuple[str, str, str]) -> dict:
    found = workload(*conditions, flavors={"nvidia.com/gpu": "h100"})
    found["metadata"] = {
        "name": f"pod-{pod}-1a2b3",
        "ownerReferences": [{"kind": "Pod", "name": pod}],
    }
    return found


def test_an_actors_workloads_are_those_of_its_own_pods_only():
    mine = owned_by("embed-7d9f8c6b5-xk2lp")
    other = owned_by("embed-large-7d9f8c6b5-xk2lp")  # an actor whose name starts with it
    single = owned_by("embed")
    finished = owned_by("embed-7d9f8c6b5-ab12c", ("Finished", "True", "pod exited"))

    assert actor_workloads("embed", [mine, other, single, finished]) == [mine]
    assert actor_workloads("embed-large", [mine, other, single]) == [other]


def test_an_actors_admission_counts_its_admitted_pods_and_says_why_the_rest_wait():
    actor = async_actor("embed", pool="team-a", replicas=3)
    admitted = [owned_by(f"embed-abc-{i}", ("Admitted", "True", "ok")) for i in range(2)]
    waiting = owned_by("embed-abc-9", ("QuotaReserved", "False", "1 more nvidia.com/gpu needed"))

    decided = kueue_admission(actor, [*admitted, waiting], None)
    missing = kueue_admission(actor, [], "Kueue is not installed")

    assert (decided.admitted, decided.flavor) == (2, "h100")
    assert decided.message == (
        "2 of 3 replicas admitted by Kueue; waiting for Kueue: 1 more nvidia.com/gpu needed"
    )
    assert (missing.admitted, missing.flavor) == (0, None)
    assert missing.message == "0 of 3 replicas admitted by Kueue; Kueue is not installed"
    assert (
        kueue_admission(
            actor, [*admitted, owned_by("embed-abc-3", ("Admitted", "True", ""))], None
        ).message
        is None
    )


def test_with_kueue_admitting_an_actor_gated_in_part_is_scaling_up_not_down():
    from datetime import UTC, datetime

    from asya_operator.plans.actor_status import plan_status

    # Kueue admitted 2 of the 3 replicas the Deployment runs; the third waits at its gate.
    actor = async_actor("embed", pool="team-a", replicas=3, status={"admittedReplicas": 2})
    deployment = {"replicas": 3, "readyReplicas": 2}
    now = datetime(2026, 11, 26, tzinfo=UTC)

    kueue = plan_status(actor, deployment, [], observed_generation=None, now=now, quota=False)
    builtin = plan_status(actor, deployment, [], observed_generation=None, now=now)

    scaling = {c.type: c for c in kueue.status.conditions or ()}["Scaling"]
    # The gated one is on its way up, not one too many.
    assert (scaling.reason, scaling.message) == ("ScalingUp", "2 ready, 3 wanted")
    assert {c.type: c for c in builtin.status.conditions or ()}["Scaling"].reason == "ScalingDown"


def test_a_long_actor_names_pods_are_still_its_own():
    from asya_operator.plans.kueue import is_actor_pod

    actor = "a" * 50  # its ReplicaSet `{actor}-{hash}-` is cut to 58 before the suffix
    pod = (f"{actor}-7d9f8c6b5d-")[:58] + "xk2lp"
    longest = "b" * 60
    its_pod = longest[:58] + "qz81m"

    assert len(pod) == 63
    assert is_actor_pod(actor, pod)
    assert not is_actor_pod("a" * 49, pod)  # one shorter: a dash would follow its name
    assert is_actor_pod(longest, its_pod)
    assert is_actor_pod("embed", "embed-7d9f8c6b5-xk2lp")
    assert not is_actor_pod("embed", "embed-large-7d9f8c6b5-xk2lp")
