"""plan_status and find_problems: what an AsyncActor's status says, and why."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from asya_operator.plans.actor_status import (
    apply_refused,
    broker_unreachable,
    find_problems,
    kept_problems,
    newly_degraded,
    plan_status,
    status_seen_since,
)
from asya_operator.plans.conditions import Problem, Reason

from tests.operator.plan_builders import async_actor, resource_flavor

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
NOW_TEXT = "2026-03-01T12:00:00Z"
BOTH_KEYS = {"amqp-url", "management-url"}
NO_SECRET = Problem(Reason.SECRET_NOT_FOUND, "Secret team-a/asya-broker not found: create it")


def conditions(status):
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


@pytest.mark.parametrize(
    ("scaling", "replicas", "observed", "problems", "expected"),
    [
        (
            {"minReplicas": 0},
            None,
            None,
            [],
            {
                "Ready": ("True", "ScaledToZero"),
                "Scaling": ("False", "Stable"),
                "Degraded": ("False", "AsExpected"),
            },
        ),
        (
            {"minReplicas": 0},
            3,
            {"replicas": 3, "readyReplicas": 1},
            [],
            {
                "Ready": ("False", "ReplicasNotReady"),
                "Scaling": ("True", "ScalingUp"),
                "Degraded": ("False", "AsExpected"),
            },
        ),
        (
            {"minReplicas": 1},
            2,
            {"replicas": 2, "readyReplicas": 2},
            [],
            {
                "Ready": ("True", "ReplicasReady"),
                "Scaling": ("False", "Stable"),
                "Degraded": ("False", "AsExpected"),
            },
        ),
        (
            {"minReplicas": 0},
            1,
            {"replicas": 4, "readyReplicas": 4},
            [],
            {
                "Ready": ("True", "ReplicasReady"),
                "Scaling": ("True", "ScalingDown"),
                "Degraded": ("False", "AsExpected"),
            },
        ),
        (
            {"minReplicas": 1},
            None,
            None,
            [NO_SECRET],
            {
                "Ready": ("False", "SecretNotFound"),
                "Scaling": ("False", "SecretNotFound"),
                "Degraded": ("True", "SecretNotFound"),
            },
        ),
    ],
    ids=["idle-at-zero", "scaling-up", "all-ready", "scaling-down", "secret-missing"],
)
def test_conditions_follow_the_deployment_and_the_problems(
    scaling, replicas, observed, problems, expected
):
    actor = async_actor(scaling=scaling, replicas=replicas, generation=1)

    status = plan_status(actor, observed, problems, observed_generation=1, now=NOW).document()

    assert conditions(status) == expected


def test_a_degraded_actor_names_every_missing_object_in_its_condition():
    problems = [
        NO_SECRET,
        Problem(Reason.FLAVOR_NOT_FOUND, "ResourceFlavor a100 not found"),
    ]

    status = plan_status(
        async_actor(), None, problems, observed_generation=None, now=NOW
    ).document()

    (degraded,) = [c for c in status["conditions"] if c["type"] == "Degraded"]
    assert degraded["message"] == (
        "Secret team-a/asya-broker not found: create it; ResourceFlavor a100 not found"
    )


def test_the_status_carries_replicas_the_hpa_selector_and_the_observed_generation():
    actor = async_actor("score", generation=7)

    status = plan_status(
        actor, {"replicas": 2, "readyReplicas": 1}, [], observed_generation=7, now=NOW
    ).document()

    assert status["replicas"] == 2
    assert status["readyReplicas"] == 1
    assert status["selector"] == "app.kubernetes.io/component=actor,asya.sh/actor=score"
    assert status["observedGeneration"] == 7


@pytest.mark.parametrize(
    ("observed_generation", "problems"),
    [(None, []), (1, []), (None, [NO_SECRET]), (1, [NO_SECRET])],
    ids=["never-applied", "older-generation", "missing-before-first", "missing-after-first"],
)
def test_an_actor_whose_generation_is_not_applied_is_not_ready_and_keeps_what_it_observed(
    observed_generation, problems
):
    # Given an actor at generation 2 with nothing desired (Ready at once, were it applied)
    actor = async_actor(scaling={"minReplicas": 0}, generation=2)

    # When its generation 2 is not yet applied (its queues not declared)
    status = plan_status(
        actor, None, problems, observed_generation=observed_generation, now=NOW
    ).document()

    # Then it is not Ready, and the generation observed is the one last applied
    ready = conditions(status)["Ready"]
    assert ready == ("False", "SecretNotFound" if problems else "Reconciling")
    assert status.get("observedGeneration") == observed_generation


def test_a_broker_found_unreachable_is_kept_and_announced_once():
    # Given an actor whose reconcile found its broker unreachable
    actor = async_actor(generation=1)
    problem = broker_unreachable("cannot reach the broker at amqp://guest:***@h:5672/")
    first = plan_status(actor, None, [problem], observed_generation=None, now=NOW)
    written = async_actor(generation=1, status=first.document())

    # When another writer (the Deployment's follower) plans its status from what it can see
    again = plan_status(written, None, kept_problems(written), observed_generation=None, now=NOW)

    # Then the broker problem is kept, and only the first status is news worth an Event
    assert kept_problems(written) == [problem]
    assert conditions(again.document())["Degraded"] == ("True", "BrokerUnreachable")
    assert newly_degraded(actor, first) == next(
        c for c in first.status.conditions or () if c.type == "Degraded"
    )
    assert newly_degraded(written, again) is None


def test_a_condition_keeps_its_transition_time_until_its_status_changes():
    before = "2026-02-01T08:00:00Z"
    actor = async_actor(
        generation=1,
        status={
            "conditions": [
                {"type": "Degraded", "status": "False", "lastTransitionTime": before},
                {"type": "Ready", "status": "False", "lastTransitionTime": before},
            ]
        },
    )

    status = plan_status(actor, None, [], observed_generation=1, now=NOW).document()

    times = {c["type"]: c["lastTransitionTime"] for c in status["conditions"]}
    assert times == {"Degraded": before, "Ready": NOW_TEXT, "Scaling": NOW_TEXT}


def test_nothing_is_missing_when_the_secret_has_both_keys_and_the_flavor_exists():
    actor = async_actor(flavor="general-cpu")

    found = find_problems(
        actor, "team-a", secret_keys=BOTH_KEYS, flavor=resource_flavor(), keepers={}
    )

    assert found == []


@pytest.mark.parametrize(
    ("secret_keys", "flavor_found", "expected"),
    [
        (
            None,
            True,
            [
                Problem(
                    Reason.SECRET_NOT_FOUND,
                    "Secret team-a/rabbit not found: create it with keys amqp-url and"
                    " management-url",
                )
            ],
        ),
        (
            {"amqp-url"},
            True,
            [
                Problem(
                    Reason.SECRET_KEY_MISSING,
                    "Secret team-a/rabbit has no key management-url: add it",
                )
            ],
        ),
        (
            BOTH_KEYS,
            False,
            [
                Problem(
                    Reason.FLAVOR_NOT_FOUND,
                    "ResourceFlavor general-cpu not found: create it or change spec.flavor",
                )
            ],
        ),
    ],
    ids=["no-secret", "no-management-url", "no-flavor"],
)
def test_each_missing_object_is_a_problem_naming_it(secret_keys, flavor_found, expected):
    actor = async_actor(flavor="general-cpu", broker={"secretName": "rabbit"})
    flavor = resource_flavor() if flavor_found else None

    found = find_problems(actor, "team-a", secret_keys=secret_keys, flavor=flavor, keepers={})

    assert found == expected


@pytest.mark.parametrize(
    "problem",
    [
        broker_unreachable("cannot reach the broker at amqp://guest:***@h:5672/"),
        apply_refused("Deployment.apps 'a' is invalid: spec.template: unknown field"),
    ],
    ids=["broker-unreachable", "apply-refused"],
)
def test_a_lasting_failure_found_again_at_each_retry_keeps_one_message(problem):
    # Given an actor whose reconcile keeps failing the same way, each retry writing its status
    # from the one the last retry wrote (as `_report_seen` does)
    actor = async_actor(generation=1)
    for _retry in range(20):
        patch = status_seen_since(actor, None, [problem], now=NOW)
        actor = async_actor(generation=1, status=patch.document())

    # Then Degraded says it once, as the first retry did, and the next writer keeps it once
    degraded = next(c for c in actor.status.conditions if c.type == "Degraded")
    assert (degraded.reason, degraded.message) == (problem.reason, problem.message)
    assert kept_problems(actor) == [problem]
    followed = status_seen_since(actor, None, [], now=NOW).document()
    assert [c["message"] for c in followed["conditions"] if c["type"] == "Degraded"] == [
        problem.message
    ]
