"""Two objects of one namespace that run as one actor name (AsyncActor `a-b-c`, ActorGroup `a`'s
member `b-c`, ActorGroup `a-b`'s member `c`) would share its queue and its objects: the one
created first keeps the name, the others are Degraded (NameTaken) naming it, and a queue goes
with its object only when no other object runs as its name."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from asya_operator.api.actor import AsyncActor, AsyncActorStatus
from asya_operator.api.group import ActorGroup, ActorGroupStatus
from asya_operator.plans.actor_status import find_problems
from asya_operator.plans.conditions import Problem, Reason
from asya_operator.plans.group_status import find_group_problems
from asya_operator.plans.names import NAME_TAKEN, name_keepers, shared_names

from tests.operator.admission_crs import GROUP, changed, member

NAMESPACE = "ml-b"
BOTH_KEYS = {"amqp-url", "management-url"}
EARLY, LATE, LATER = "2026-11-25T12:00:00Z", "2026-11-25T12:00:05Z", "2026-11-25T12:01:00Z"


def group(name: str, *members: str, created: str = EARLY) -> ActorGroup:
    body = changed(
        GROUP,
        metadata__name=name,
        metadata__creationTimestamp=created,
        spec__members=[member(name=m) for m in members],
    )
    return msgspec.convert(body, ActorGroup)


def actor(name: str, created: str = EARLY) -> AsyncActor:
    body: dict[str, Any] = {
        "apiVersion": "asya.sh/v1alpha1",
        "kind": "AsyncActor",
        "metadata": {"name": name, "namespace": NAMESPACE, "creationTimestamp": created},
        "spec": {"image": "registry.example.com/app:1", "handler": "app.text:normalize"},
    }
    return msgspec.convert(body, AsyncActor)


def group_problems(subject: ActorGroup, *everyone: AsyncActor | ActorGroup) -> list[Problem]:
    return find_group_problems(
        subject,
        NAMESPACE,
        secret_keys=BOTH_KEYS,
        missing_flavors=(),
        keepers=name_keepers(everyone),
    )


def actor_problems(subject: AsyncActor, *everyone: AsyncActor | ActorGroup) -> list[Problem]:
    return find_problems(
        subject, NAMESPACE, secret_keys=BOTH_KEYS, flavor=None, keepers=name_keepers(everyone)
    )


def test_a_group_whose_member_runs_as_another_groups_member_is_refused_naming_it():
    older, newer = group("a", "b-c", created=EARLY), group("a-b", "c", created=LATE)

    refused = group_problems(newer, older, newer)
    kept = group_problems(older, older, newer)

    assert refused == [
        Problem(
            Reason.NAME_TAKEN,
            "member c runs as actor a-b-c, which ActorGroup ml-b/a (its member b-c) runs as,"
            " created first: rename member c or ActorGroup a-b, or delete ActorGroup a",
        )
    ]
    assert kept == []


@pytest.mark.parametrize(
    ("first", "second"),
    [(EARLY, LATE), (LATE, EARLY)],
    ids=["a-first", "a-b-first"],
)
def test_the_group_created_first_keeps_the_name(first, second):
    a, a_b = group("a", "b-c", created=first), group("a-b", "c", created=second)

    refused = [g.metadata["name"] for g in (a, a_b) if group_problems(g, a, a_b)]

    assert refused == ["a-b" if first == EARLY else "a"]


def test_of_two_groups_created_in_the_same_second_the_first_by_name_keeps_it():
    a, a_b = group("a", "b-c"), group("a-b", "c")

    assert group_problems(a, a_b, a) == []
    assert [p.reason for p in group_problems(a_b, a_b, a)] == [Reason.NAME_TAKEN]


def test_of_two_objects_created_in_the_same_second_the_one_already_applied_keeps_it():
    # The timestamp says seconds: within one, the one that already runs as the name was first.
    a = group("a", "b-c")
    a_b = msgspec.structs.replace(group("a-b", "c"), status=ActorGroupStatus(observed_generation=1))
    running = msgspec.structs.replace(
        actor("a-b-c"), status=AsyncActorStatus(observed_generation=1)
    )

    assert [p.reason for p in group_problems(a, a, a_b)] == [Reason.NAME_TAKEN]
    assert group_problems(a_b, a, a_b) == []
    assert [p.reason for p in group_problems(a, a, running)] == [Reason.NAME_TAKEN]


def test_of_an_actor_and_a_group_created_in_the_same_second_neither_applied_the_actor_keeps_it():
    team, same = group("a", "b-c"), actor("a-b-c")

    assert actor_problems(same, team, same) == []
    assert [p.reason for p in group_problems(team, team, same)] == [Reason.NAME_TAKEN]


def test_an_actor_created_after_a_group_whose_member_runs_as_its_name_is_refused():
    team, late = group("a", "b-c", created=EARLY), actor("a-b-c", created=LATE)

    refused = actor_problems(late, team, late)
    kept = group_problems(team, team, late)

    assert refused == [
        Problem(
            Reason.NAME_TAKEN,
            "actor a-b-c is what ActorGroup ml-b/a (its member b-c) runs as, created first:"
            " rename AsyncActor a-b-c, or delete ActorGroup a",
        )
    ]
    assert kept == []


def test_a_group_created_after_an_actor_of_its_members_name_is_refused():
    early, team = actor("a-b-c", created=EARLY), group("a", "b-c", created=LATE)

    refused = group_problems(team, early, team)

    assert refused == [
        Problem(
            Reason.NAME_TAKEN,
            "member b-c runs as actor a-b-c, which AsyncActor ml-b/a-b-c runs as, created first:"
            " rename member b-c or ActorGroup a, or delete AsyncActor a-b-c",
        )
    ]
    assert actor_problems(early, early, team) == []


def test_a_refused_group_keeps_none_of_its_names():
    # a-b is refused for a-b-c, so no one runs as a-b-d: the actor created after it may.
    first, refused = group("a", "b-c", created=EARLY), group("a-b", "c", "d", created=LATE)
    last = actor("a-b-d", created=LATER)

    assert actor_problems(last, first, refused, last) == []
    refusals = group_problems(refused, first, refused, last)
    assert [p.message.split(",")[0] for p in refusals] == [
        "member c runs as actor a-b-c",
        "member d runs as actor a-b-d",
    ]


def test_a_younger_object_keeping_a_name_of_a_refused_group_is_not_said_to_be_created_first():
    first, team = actor("a-b-c", created=EARLY), group("a", "b-c", "d", created=LATE)
    last = actor("a-d", created=LATER)

    refusals = group_problems(team, first, team, last)

    assert [p.message for p in refusals] == [
        "member b-c runs as actor a-b-c, which AsyncActor ml-b/a-b-c runs as, created first:"
        " rename member b-c or ActorGroup a, or delete AsyncActor a-b-c",
        "member d runs as actor a-d, which AsyncActor ml-b/a-d runs as, ActorGroup a being"
        " refused another of its names: rename member d or ActorGroup a, or delete AsyncActor"
        " a-d",
    ]


def test_a_queue_another_object_runs_as_is_not_the_leaving_ones_to_delete():
    keeper, refused = group("a", "b-c", created=EARLY), group("a-b", "c", "d", created=LATE)

    # The refused group runs as a-b-c only in name: the keeper's queue stays.
    assert shared_names(refused, [keeper]) == ["a-b-c"]
    # The keeper leaving while the refused group still asks for the name: the queue stays,
    # for the group that runs as it next.
    assert shared_names(keeper, [refused]) == ["a-b-c"]
    assert shared_names(keeper, [keeper]) == []
    assert shared_names(keeper, []) == []
    assert shared_names(actor("a-b-c"), [keeper]) == ["a-b-c"]


def running(owner, *, generation: int = 1, refused: bool = False):
    """`owner` as applied at `generation` (its status's observedGeneration), refused a name
    or not."""
    conditions = (
        [{"type": "Degraded", "status": "True", "reason": "NameTaken", "message": "taken"}]
        if refused
        else []
    )
    status_type = AsyncActorStatus if isinstance(owner, AsyncActor) else ActorGroupStatus
    status = msgspec.convert({"observedGeneration": 1, "conditions": conditions}, status_type)
    metadata = {**owner.metadata, "generation": generation}
    return msgspec.structs.replace(owner, metadata=metadata, status=status)


def test_the_condition_reason_the_names_layer_reads_is_the_one_statuses_write():
    assert Reason.NAME_TAKEN == NAME_TAKEN


def test_a_running_actor_keeps_its_name_when_a_third_object_goes():
    # a-b-c came first; group a (b-c, d) was refused for it; a-d came last and runs. a-b-c
    # going must not hand a-d to the older group: a-d runs as it.
    refused = running(group("a", "b-c", "d", created=LATE), refused=True)
    last = running(actor("a-d", created=LATER))

    assert actor_problems(last, refused, last) == []
    assert [p.reason for p in group_problems(refused, refused, last)] == [Reason.NAME_TAKEN]


def test_a_member_added_to_an_older_group_does_not_take_a_running_actors_name():
    older = running(group("a", "x", "b-c", created=EARLY), generation=2)  # b-c just added
    actor_running = running(actor("a-b-c", created=LATE))

    assert actor_problems(actor_running, older, actor_running) == []
    assert group_problems(older, older, actor_running) == [
        Problem(
            Reason.NAME_TAKEN,
            # The keeper is the younger one: it keeps the name because it runs as it.
            "member b-c runs as actor a-b-c, which AsyncActor ml-b/a-b-c already runs as:"
            " rename member b-c or ActorGroup a, or delete AsyncActor a-b-c",
        )
    ]


def test_an_older_object_refused_before_keeps_the_name_once_the_runner_is_gone():
    refused = running(group("a", "b-c", created=EARLY), refused=True)
    newcomer = actor("a-b-c", created=LATER)

    assert group_problems(refused, refused, newcomer) == []
    assert [p.reason for p in actor_problems(newcomer, refused, newcomer)] == [Reason.NAME_TAKEN]
