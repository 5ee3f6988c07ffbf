"""Every condition an AsyncActor's status carries says the generation it was set from
(`observedGeneration`, as metav1.Condition has it)."""

from __future__ import annotations

from datetime import UTC, datetime

from asya_operator.plans.actor_status import plan_admission_status, plan_status
from asya_operator.plans.workloads import ActorAdmission

from tests.operator.plan_builders import async_actor

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def generations(status) -> dict[str, int]:
    return {c["type"]: c["observedGeneration"] for c in status["conditions"]}


def test_the_reconciles_conditions_carry_the_actors_generation():
    actor = async_actor(generation=5)

    status = plan_status(actor, None, [], observed_generation=4, now=NOW).document()

    assert generations(status) == {"Ready": 5, "Scaling": 5, "Degraded": 5}


def test_the_admission_pass_conditions_carry_the_actors_generation():
    actor = async_actor(generation=3, pool="team-a", replicas=2, scaling={"maxReplicas": 8})
    admission = ActorAdmission(2, "h100", False, None, None)

    status = plan_admission_status(actor, admission, now=NOW).document()

    assert generations(status) == {"QuotaReserved": 3, "Admitted": 3, "Preempted": 3}


def test_a_new_generation_with_the_same_conditions_is_news_to_write():
    admission = ActorAdmission(2, "h100", False, None, None)
    spec = {"pool": "team-a", "replicas": 2, "scaling": {"maxReplicas": 8}}
    first = plan_admission_status(async_actor(generation=1, **spec), admission, now=NOW)
    stored = async_actor(generation=1, status=first.document(), **spec)

    again = plan_admission_status(stored, admission, now=NOW)
    bumped = plan_admission_status(
        async_actor(generation=2, status=first.document(), **spec), admission, now=NOW
    )

    assert not again.changed(stored.status)
    assert bumped.changed(stored.status)
