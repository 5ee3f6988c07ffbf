"""An actor with a pool: its Deployment runs the admitted replicas, and its status says why."""

from __future__ import annotations

from datetime import UTC, datetime

from asya_operator.config import OperatorConfig
from asya_operator.plans.actor_objects import plan_deployment
from asya_operator.plans.actor_status import (
    pending_since,
    plan_admission_status,
    plan_status,
)
from asya_operator.plans.pods import placement_flavor
from asya_operator.plans.scaling import running_replicas
from asya_operator.plans.workloads import ActorAdmission

from tests.operator.plan_builders import async_actor, resource_flavor

NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
LATER = datetime(2026, 11, 23, 9, 5, tzinfo=UTC)


def pooled(replicas=5, admitted=None, flavor=None, conditions=None, **spec):
    status = {}
    if admitted is not None:
        status["admittedReplicas"] = admitted
    if flavor is not None:
        status["admittedFlavor"] = flavor
    if conditions is not None:
        status["conditions"] = conditions
    return async_actor(
        pool="team-a",
        replicas=replicas,
        scaling={"maxReplicas": 8},
        status=status or None,
        **spec,
    )


def by_type(status):
    return {c["type"]: c for c in status["conditions"]}


def test_an_actor_with_a_pool_runs_its_admitted_replicas_never_more_than_desired():
    assert running_replicas(pooled(replicas=5)) == 0  # not admitted yet: no pod waits for quota
    assert running_replicas(pooled(replicas=5, admitted=2)) == 2
    assert running_replicas(pooled(replicas=1, admitted=3)) == 1
    assert running_replicas(async_actor(replicas=5)) == 5  # no pool: what KEDA asks


def test_the_deployment_runs_the_admitted_count_placed_by_the_admitted_flavor():
    actor = pooled(replicas=4, admitted=3, flavor="h100")
    flavor = resource_flavor("h100", nodeLabels={"gpu": "h100"})

    deployment = plan_deployment(actor, "team-a", flavor, OperatorConfig())

    assert placement_flavor(actor) == "h100"
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == {"gpu": "h100"}


def test_the_flavor_an_actor_names_wins_over_the_one_it_was_admitted_in():
    assert placement_flavor(pooled(admitted=1, flavor="a100")) == "a100"  # none named
    assert placement_flavor(async_actor(flavor="h100", status={"admittedFlavor": "a"})) == "h100"


def test_a_partly_admitted_actor_holds_quota_but_is_not_admitted_and_says_why():
    admission = ActorAdmission(
        admitted=2,
        flavor="h100",
        borrowing=True,
        message="2 of 5 replicas admitted, 3 waiting: insufficient quota for nvidia.com/gpu",
        preempted_by=None,
    )

    status = plan_admission_status(pooled(replicas=5), admission, now=NOW).document()

    conditions = by_type(status)
    assert (status["admittedReplicas"], status["admittedFlavor"]) == (2, "h100")
    assert conditions["QuotaReserved"]["status"] == "True"
    assert "borrowing" in conditions["QuotaReserved"]["message"]
    assert (conditions["Admitted"]["status"], conditions["Admitted"]["reason"]) == (
        "False",
        "Pending",
    )
    assert conditions["Admitted"]["message"] == admission.message
    assert conditions["Preempted"]["status"] == "False"


def test_a_preempted_actor_says_by_whom_and_keeps_its_other_conditions():
    before = plan_status(
        pooled(replicas=2, admitted=2), None, [], observed_generation=None, now=NOW
    ).document()["conditions"]
    actor = pooled(replicas=2, admitted=2, conditions=before)
    admission = ActorAdmission(0, None, False, "0 of 2 replicas admitted, 2 waiting", "ns/urgent")

    status = plan_admission_status(actor, admission, now=LATER).document()

    conditions = by_type(status)
    assert conditions["Preempted"]["status"] == "True"
    assert "preempted by ns/urgent" in conditions["Preempted"]["message"]
    assert conditions["QuotaReserved"]["status"] == "False"
    assert {"Ready", "Scaling", "Degraded"} <= set(conditions)


def test_plan_status_keeps_the_admission_conditions_and_leaves_the_counts_to_the_pass():
    admitted = plan_admission_status(
        pooled(replicas=3), ActorAdmission(3, "h100", False, None, None), now=NOW
    ).document()
    actor = pooled(replicas=3, admitted=3, flavor="h100", conditions=admitted["conditions"])

    status = plan_status(
        actor, {"replicas": 3, "readyReplicas": 3}, [], observed_generation=None, now=LATER
    ).document()

    assert by_type(status)["Admitted"] == by_type(admitted)["Admitted"]
    assert "admittedReplicas" not in status  # the pass's alone: never written back stale
    assert by_type(status)["Ready"]["status"] == "True"


def test_pending_since_is_when_admitted_last_turned_false_and_none_once_all_are_admitted():
    waiting = ActorAdmission(1, "h100", False, "1 of 3 replicas admitted, 2 waiting", None)
    first = plan_admission_status(pooled(replicas=3), waiting, now=NOW)
    still = plan_admission_status(
        pooled(replicas=3, admitted=1, flavor="h100", conditions=first.document()["conditions"]),
        waiting,
        now=LATER,
    )
    done = plan_admission_status(
        pooled(replicas=3), ActorAdmission(3, "h100", False, None, None), now=LATER
    )

    assert pending_since(first) == pending_since(still) == NOW.timestamp()
    assert pending_since(done) is None


def test_a_status_that_says_what_the_actor_already_says_is_no_change():
    admission = ActorAdmission(2, "h100", False, None, None)
    status = plan_admission_status(pooled(replicas=2), admission, now=NOW)
    actor = pooled(
        replicas=2, admitted=2, flavor="h100", conditions=status.document()["conditions"]
    )

    assert status.changed(pooled(replicas=2).status)
    assert not plan_admission_status(actor, admission, now=LATER).changed(actor.status)


def test_replicas_that_ask_for_no_accelerator_on_a_flavor_that_has_them_say_so():
    fallback = "on h100: pool team-a has no flavor without accelerators"
    admission = ActorAdmission(
        admitted=2,
        flavor="h100",
        borrowing=False,
        message=None,
        preempted_by=None,
        accelerator_fallback=fallback,
    )

    status = plan_admission_status(pooled(replicas=2), admission, now=NOW).document()

    assert by_type(status)["QuotaReserved"]["message"] == (
        "2 replicas hold quota in flavor h100 of pool team-a, though they ask for no"
        f" accelerator ({fallback})"
    )


def test_an_actor_that_left_its_pool_drops_what_it_held_there():
    left = async_actor(replicas=2, status={"admittedReplicas": 2, "admittedFlavor": "gpu"})

    status = plan_status(
        left, {"replicas": 2, "readyReplicas": 2}, [], observed_generation=None, now=NOW
    )
    pooled_status = plan_status(
        pooled(replicas=2, admitted=2, flavor="gpu"),
        {"replicas": 2, "readyReplicas": 2},
        [],
        observed_generation=None,
        now=NOW,
    )

    document = status.document()
    assert (document["admittedReplicas"], document["admittedFlavor"]) == (None, None)
    assert "admittedReplicas" not in pooled_status.document()  # the pass's alone
