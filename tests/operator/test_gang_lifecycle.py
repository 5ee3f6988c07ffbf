"""A gang instance from pass to pass (`asya_operator.plans.instances`): admitted whole, ready,
preempted and queued again, evicted for not becoming ready and backing off, requeued,
deactivated and reactivated. Time is an argument: every deadline is exact."""

from __future__ import annotations

from typing import Any

import msgspec
from asya_operator.api.group import ActorGroup, InstanceStatus
from asya_operator.plans.instances import (
    Happened,
    after_pass,
    before_pass,
    next_deadline,
    pooled_group,
    stamp,
    unpooled,
)
from asya_operator.plans.workloads import InstanceAdmission

from asya.admission.readiness import GangPhase
from tests.operator.admission_crs import GROUP, changed

T0 = 1_800_000_000.0
"""A pass's `now` (Unix seconds)."""

WHOLE = {"worker": ("h100", 4)}


def group(
    *, replicas: int = 1, instances: list[dict[str, Any]] | None = None, **spec: Any
) -> ActorGroup:
    body = changed(
        GROUP,
        metadata__namespace="ml-b",
        spec__replicas=replicas,
        spec__readinessTimeoutSeconds=60,
        spec__requeuing={
            "backoffBaseSeconds": 10,
            "backoffMaxSeconds": 30,
            **spec.pop("requeuing", {}),
        },
        **{f"spec__{k}": v for k, v in spec.items()},
    )
    if instances is not None:
        body["status"] = {"instances": instances}
    return msgspec.convert(body, ActorGroup)


def admitted_at(at: float, instance: int = 0, evictions: int = 0) -> dict[str, Any]:
    return {
        "instance": instance,
        "phase": "WaitingForReady",
        "admittedAt": stamp(at),
        "evictions": evictions,
        "members": [{"name": "worker", "flavor": "h100", "replicas": 4}],
    }


def states_after_admission(at: float = T0) -> dict[int, InstanceStatus]:
    states, _ = before_pass(group(), {}, at)
    return after_pass(states, {0: InstanceAdmission(WHOLE)}, at)[0]


def test_a_new_instance_asks_for_quota_and_once_admitted_waits_for_its_pods_with_a_deadline():
    states, changes = before_pass(group(), {}, T0)

    assert states[0].phase is GangPhase.PENDING
    assert changes == []
    assert pooled_group(group(), states, age=0).pending == (0,)

    after, changes = after_pass(states, {0: InstanceAdmission(WHOLE)}, T0)

    assert after[0].phase is GangPhase.WAITING_FOR_READY
    assert [(m.name, m.flavor, m.replicas) for m in after[0].members or ()] == [
        ("worker", "h100", 4)
    ]
    assert [c.happened for c in changes] == [Happened.ADMITTED]
    assert next_deadline(group(), after) == T0 + 60


def test_an_instance_whose_pods_are_all_ready_in_time_is_ready_and_holds_its_quota():
    states, changes = before_pass(group(instances=[admitted_at(T0)]), {0: True}, T0 + 59)

    assert states[0].phase is GangPhase.READY
    assert changes == []
    assert pooled_group(group(), states, age=0).held == {0: WHOLE}


def test_an_instance_not_ready_at_its_deadline_is_evicted_whole_and_backs_off():
    states, changes = before_pass(group(instances=[admitted_at(T0)]), {0: False}, T0 + 60)

    evicted = states[0]
    assert evicted.phase is GangPhase.BACKING_OFF
    assert (evicted.members, evicted.evictions, evicted.requeue_at) == (None, 1, stamp(T0 + 70))
    assert [c.happened for c in changes] == [Happened.EVICTED]
    assert "queued again in 10 s" in changes[0].message
    shown = pooled_group(group(), states, age=0)
    assert (shown.pending, shown.held) == ((), {})


def test_just_before_its_deadline_an_instance_still_waits():
    states, changes = before_pass(group(instances=[admitted_at(T0)]), {0: False}, T0 + 59.9)

    assert states[0].phase is GangPhase.WAITING_FOR_READY
    assert changes == []


def test_the_backoff_doubles_with_each_eviction_up_to_its_cap():
    second, _ = before_pass(group(instances=[admitted_at(T0, evictions=1)]), {}, T0 + 60)
    third, _ = before_pass(group(instances=[admitted_at(T0, evictions=2)]), {}, T0 + 60)

    assert second[0].requeue_at == stamp(T0 + 60 + 20)
    assert third[0].requeue_at == stamp(T0 + 60 + 30)  # 40 s, capped at backoffMaxSeconds


def test_a_backed_off_instance_queues_again_when_its_time_comes():
    backing_off = {"instance": 0, "phase": "BackingOff", "evictions": 1, "requeueAt": stamp(T0)}

    early, _ = before_pass(group(instances=[backing_off]), {}, T0 - 0.5)
    states, changes = before_pass(group(instances=[backing_off]), {}, T0)

    assert early[0].phase is GangPhase.BACKING_OFF
    assert next_deadline(group(), early) == T0
    assert states[0].phase is GangPhase.PENDING
    assert states[0].evictions == 1
    assert [c.happened for c in changes] == [Happened.REQUEUED]


def test_past_its_backoff_limit_an_instance_is_deactivated_until_reactivated():
    limited = {"requeuing": {"backoffLimitCount": 1}}
    states, changes = before_pass(
        group(instances=[admitted_at(T0, evictions=1)], **limited), {}, T0 + 60
    )

    assert states[0].phase is GangPhase.DEACTIVATED
    assert [c.happened for c in changes] == [Happened.DEACTIVATED]
    assert "asya.sh/reactivate" in changes[0].message
    later, _ = before_pass(
        group(instances=[msgspec.to_builtins(states[0])], **limited), {}, T0 + 10_000
    )
    assert later[0].phase is GangPhase.DEACTIVATED

    asked = group(instances=[msgspec.to_builtins(states[0])], **limited)
    asked.metadata["annotations"] = {"asya.sh/reactivate": "please"}
    again, changes = before_pass(asked, {}, T0 + 10_000)

    assert (again[0].phase, again[0].evictions) == (GangPhase.PENDING, 0)
    assert [c.happened for c in changes] == [Happened.REACTIVATED]


def test_a_preempted_instance_queues_again_at_once_without_counting_an_eviction():
    states, _ = before_pass(group(instances=[admitted_at(T0, evictions=1)]), {0: True}, T0 + 5)
    lost = InstanceAdmission(None, message="insufficient quota", preempted_by="ml-a/urgent[0]")

    after, changes = after_pass(states, {0: lost}, T0 + 5)

    assert (after[0].phase, after[0].members, after[0].evictions) == (GangPhase.PENDING, None, 1)
    assert (after[0].preempted_by, after[0].message) == ("ml-a/urgent[0]", "insufficient quota")
    assert [c.happened for c in changes] == [Happened.PREEMPTED]
    assert changes[0].message == "preempted whole by ml-a/urgent[0]: insufficient quota"

    still, _ = after_pass(after, {0: InstanceAdmission(None, message="still no room")}, T0 + 6)
    back, _ = after_pass(still, {0: InstanceAdmission(WHOLE)}, T0 + 7)

    assert (still[0].preempted_by, still[0].message) == ("ml-a/urgent[0]", "still no room")
    assert back[0].preempted_by is None


def test_a_scale_down_releases_the_instances_beyond_the_new_count():
    two = group(replicas=1, instances=[admitted_at(T0, 0), admitted_at(T0, 1)])

    states, changes = before_pass(two, {0: True, 1: True}, T0 + 1)

    assert list(states) == [0]
    assert [(c.instance, c.happened) for c in changes] == [(1, Happened.RELEASED)]


def test_an_instance_that_keeps_its_quota_keeps_its_readiness_clock():
    states = states_after_admission()

    kept, changes = after_pass(states, {0: InstanceAdmission(WHOLE)}, T0 + 30)

    assert kept[0].admitted_at == stamp(T0)
    assert changes == []


def test_a_group_without_a_pool_runs_every_instance_whole_and_is_never_evicted():
    free = group(replicas=2, pool=None)

    states = unpooled(free, {0: True})

    assert [(i, s.phase) for i, s in states.items()] == [
        (0, GangPhase.READY),
        (1, GangPhase.WAITING_FOR_READY),
    ]
    assert [(m.name, m.replicas) for m in states[1].members or ()] == [("worker", 4)]
    assert next_deadline(free, states) is None


def test_an_instance_admitted_on_accelerators_it_does_not_ask_for_says_so_in_its_event():
    states, _changes = before_pass(group(), {}, T0)
    fallback = "coordinator: on h100: pod set coordinator may use only flavor h100"

    _after, changes = after_pass(
        states, {0: InstanceAdmission(WHOLE, accelerator_fallback=fallback)}, T0
    )

    [admitted] = changes
    assert admitted.message.endswith(f"; no accelerator asked for, {fallback}")
