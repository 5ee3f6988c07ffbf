"""StatusPatch: a typed status, written as the fields its writer owns; "changed?" asked once."""

from __future__ import annotations

import pytest
from asya_operator.api.actor import AsyncActorStatus
from asya_operator.api.template import Condition
from asya_operator.plans.statuses import StatusPatch

READY = Condition(type="Ready", status="True", reason="ReplicasReady", message="2 of 2")


def test_the_document_holds_the_owned_fields_only_an_unset_one_as_null():
    status = AsyncActorStatus(admitted_replicas=0, admitted_flavor=None, replicas=3)
    patch = StatusPatch.of(status, {"admitted_replicas", "admitted_flavor"})

    assert patch.document() == {"admittedReplicas": 0, "admittedFlavor": None}


def test_unset_fields_inside_a_condition_are_left_out():
    patch = StatusPatch.of(AsyncActorStatus(conditions=[READY]), {"conditions"})

    (condition,) = patch.document()["conditions"]
    assert "lastTransitionTime" not in condition
    assert condition == {
        "type": "Ready",
        "status": "True",
        "reason": "ReplicasReady",
        "message": "2 of 2",
    }


def test_a_field_the_status_does_not_have_is_refused():
    with pytest.raises(ValueError, match="admitted"):
        StatusPatch.of(AsyncActorStatus(), {"admitted"})


def test_changed_compares_the_owned_fields_and_conditions_without_their_times():
    stored = AsyncActorStatus(
        replicas=1,
        conditions=[
            Condition(**{**_fields(READY), "last_transition_time": "2026-01-01T00:00:00Z"})
        ],
    )
    same = StatusPatch.of(
        AsyncActorStatus(
            replicas=9,
            conditions=[
                Condition(**{**_fields(READY), "last_transition_time": "2027-01-01T00:00:00Z"})
            ],
        ),
        {"conditions"},
    )
    news = StatusPatch.of(
        AsyncActorStatus(replicas=9, conditions=[READY]), {"replicas", "conditions"}
    )

    assert not same.changed(stored)  # replicas are not its to write; the time alone moved
    assert news.changed(stored)
    assert news.changed(None)


def _fields(condition: Condition) -> dict[str, object]:
    return {name: getattr(condition, name) for name in condition.__struct_fields__}
