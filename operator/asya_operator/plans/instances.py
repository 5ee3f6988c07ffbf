"""A gang instance's life from one admission pass to the next: admitted, ready, preempted,
evicted for not becoming ready, backing off, requeued, deactivated.

Pure: an ActorGroup (its status holds each instance's state), which instances are ready, and
`now` (Unix seconds) in; the instances' new states and what happened to them out. The
readiness rules are `asya.admission.readiness`'s (Kueue's waitForPodsReady); this module keeps
their state in the CR's `status.instances` and turns the engine's decisions into it.

A pass over a group with a pool, as the controller runs it:
1. `before_pass`: instances beyond the desired count (`desired_instances`) are dropped (their
   quota released); an admitted instance not ready within `readinessTimeoutSeconds` is
   evicted (quota released, backing off) or, past `requeuing.backoffLimitCount`, deactivated;
   a backed-off instance whose time has come queues again; a `asya.sh/reactivate` annotation
   not yet acted on puts deactivated instances back in the queue.
2. `pooled_group`: the pending instances ask for quota, the admitted ones hold theirs.
3. the engine decides (`asya_operator.plans.admission.admit`);
4. `after_pass`: a newly admitted instance starts its readiness clock; a held one that lost
   its quota was preempted and queues again at once (preemption is not a readiness failure,
   so it does not count towards the backoff), as in Kueue.
A group without a pool runs every instance at full size: no quota, no readiness eviction.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Final

import msgspec

from asya.admission import readiness
from asya.admission.readiness import GangAction, GangPhase, GangState, ReadinessPolicy
from asya_operator.api.group import (
    HOLDING,
    REACTIVATE_ANNOTATION,
    ActorGroup,
    InstanceStatus,
    MemberAdmission,
    MemberHold,
    desired_instances,
    held,
    known_instances,
)
from asya_operator.plans.workloads import InstanceAdmission, PooledGroup, PooledMember

_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"


class Happened(enum.StrEnum):
    """What a pass did to an instance: each is reported (an Event, the operator's log)."""

    ADMITTED = "Admitted"
    PREEMPTED = "Preempted"
    EVICTED = "Evicted"
    DEACTIVATED = "Deactivated"
    REQUEUED = "Requeued"
    REACTIVATED = "Reactivated"
    RELEASED = "Released"
    """Dropped by a scale-down while holding quota."""


@dataclasses.dataclass(frozen=True)
class Change:
    """One thing that happened to one instance, in words."""

    instance: int
    happened: Happened
    message: str


def stamp(at: float) -> str:
    """Unix seconds as the RFC 3339 timestamp `status.instances` keeps (microseconds kept, so
    a readiness deadline read back is never earlier than the one set)."""
    return datetime.fromtimestamp(at, UTC).strftime(_TIME_FORMAT)


def _seconds(text: str | None) -> float | None:
    if text is None:
        return None
    return datetime.strptime(text, _TIME_FORMAT).replace(tzinfo=UTC).timestamp()


def policy_of(group: ActorGroup) -> ReadinessPolicy:
    """The group's readiness and requeuing settings, as the engine's rules take them."""
    spec = group.spec
    return ReadinessPolicy(
        timeout_s=float(spec.readiness_timeout_seconds),
        backoff_base_s=float(spec.requeuing.backoff_base_seconds),
        backoff_max_s=float(spec.requeuing.backoff_max_seconds),
        backoff_limit=spec.requeuing.backoff_limit_count,
    )


def _state(instance: InstanceStatus) -> GangState:
    return GangState(
        phase=instance.phase,
        admitted_at=_seconds(instance.admitted_at),
        evictions=instance.evictions,
        requeue_at=_seconds(instance.requeue_at),
    )


def _with_state(instance: InstanceStatus, state: GangState, **fields: object) -> InstanceStatus:
    changed = {
        "phase": state.phase,
        "admitted_at": None if state.admitted_at is None else stamp(state.admitted_at),
        "evictions": state.evictions,
        "requeue_at": None if state.requeue_at is None else stamp(state.requeue_at),
    }
    return msgspec.structs.replace(instance, **changed | fields)


def reactivation_asked(group: ActorGroup) -> str | None:
    """The `asya.sh/reactivate` annotation's value when it is one not yet acted on."""
    value = (group.metadata.get("annotations") or {}).get(REACTIVATE_ANNOTATION)
    done = group.status.reactivated if group.status is not None else None
    return None if value is None or value == done else str(value)


def before_pass(
    group: ActorGroup,
    ready: Mapping[int, bool],
    now: float,
    unplaced: Mapping[int, str] | None = None,
) -> tuple[dict[int, InstanceStatus], list[Change]]:
    """The instances of a pooled group as the pass starts (see the module docstring, step 1).

    `ready` says, for each instance holding quota, whether every one of its pods is ready;
    `unplaced`, why its gang scheduler cannot place one (an eviction says so).
    """
    policy = policy_of(group)
    reactivate = reactivation_asked(group) is not None
    states: dict[int, InstanceStatus] = {}
    changes: list[Change] = []
    for index, instance in sorted(known_instances(group).items()):
        if index >= desired_instances(group):
            if instance.phase in HOLDING:
                changes.append(Change(index, Happened.RELEASED, "scaled away: quota released"))
            continue
        if reactivate and instance.phase is GangPhase.DEACTIVATED:
            states[index] = InstanceStatus(instance=index)
            changes.append(Change(index, Happened.REACTIVATED, "reactivated: queued again"))
            continue
        state, action = readiness.step(
            _state(instance), policy, ready=ready.get(index, False), now=now
        )
        why = (unplaced or {}).get(index)
        states[index], change = _acted(instance, state, action, policy, now, why)
        if change is not None:
            changes.append(change)
    for index in range(desired_instances(group)):
        states.setdefault(index, InstanceStatus(instance=index))
    return states, changes


def _acted(
    instance: InstanceStatus,
    state: GangState,
    action: GangAction,
    policy: ReadinessPolicy,
    now: float,
    unplaced: str | None = None,
) -> tuple[InstanceStatus, Change | None]:
    index = instance.instance
    timeout = f"not every pod ready within {policy.timeout_s:g} s"
    if unplaced is not None:
        timeout += f" ({unplaced})"
    if action is GangAction.EVICT:
        wait = (state.requeue_at or now) - now
        message = (
            f"evicted whole, {timeout} (eviction {state.evictions}): quota released,"
            f" queued again in {wait:g} s"
        )
        evicted = _with_state(instance, state, members=None, message=message)
        return evicted, Change(index, Happened.EVICTED, message)
    if action is GangAction.DEACTIVATE:
        message = (
            f"deactivated after {state.evictions} evictions ({timeout}): quota released; set"
            f" the {REACTIVATE_ANNOTATION} annotation to queue it again"
        )
        gone = _with_state(instance, state, members=None, message=message)
        return gone, Change(index, Happened.DEACTIVATED, message)
    if action is GangAction.REQUEUE:
        message = f"queued again after its backoff (eviction {state.evictions})"
        return _with_state(instance, state, message=message), Change(
            index, Happened.REQUEUED, message
        )
    if state.phase is GangPhase.READY and instance.phase is not GangPhase.READY:
        return _with_state(instance, state, message=None), None
    return instance, None


def pooled_group(
    group: ActorGroup, states: Mapping[int, InstanceStatus], *, age: int
) -> PooledGroup:
    """The group as one admission pass sees it: pending instances ask, admitted ones hold."""
    spec, name = group.spec, str(group.metadata["name"])
    assert spec.pool is not None  # only pooled groups are admitted
    return PooledGroup(
        namespace=str(group.metadata["namespace"]),
        name=name,
        pool=spec.pool,
        priority=spec.priority,
        age=age,
        members=tuple(
            PooledMember(
                name=m.name,
                replicas=m.replicas,
                min_replicas=m.min_replicas,
                resources=m.template.resources,
                flavor=m.template.flavor,
            )
            for m in spec.members
        ),
        pending=tuple(i for i, s in sorted(states.items()) if s.phase is GangPhase.PENDING),
        held={i: held(s) for i, s in sorted(states.items()) if s.phase in HOLDING},
    )


def after_pass(
    states: Mapping[int, InstanceStatus],
    decided: Mapping[int, InstanceAdmission],
    now: float,
) -> tuple[dict[int, InstanceStatus], list[Change]]:
    """The instances once the engine has decided (see the module docstring, step 4)."""
    out: dict[int, InstanceStatus] = {}
    changes: list[Change] = []
    for index, instance in sorted(states.items()):
        decision = decided.get(index)
        if decision is None:  # backing off or deactivated: not in this pass
            out[index] = instance
            continue
        if decision.members is not None:
            members = _members(decision.members)
            if instance.phase in HOLDING:
                out[index] = msgspec.structs.replace(instance, members=members)
                continue
            state = readiness.on_admitted(_state(instance), now)
            where = ", ".join(f"{m.name}: {m.replicas} in {m.flavor}" for m in members)
            borrowed = ", borrowing from its cohort" if decision.borrowing else ""
            fallback = decision.accelerator_fallback
            fell_back = "" if fallback is None else f"; no accelerator asked for, {fallback}"
            message = f"admitted whole ({where}){borrowed}{fell_back}"
            out[index] = _with_state(
                instance, state, members=members, message=None, preempted_by=None
            )
            changes.append(Change(index, Happened.ADMITTED, message))
            continue
        if instance.phase in HOLDING:
            by = decision.preempted_by or "a workload of higher priority"
            message = f"preempted whole by {by}: {decision.message}"
            queued = GangState(phase=GangPhase.PENDING, evictions=instance.evictions)
            out[index] = _with_state(
                instance, queued, members=None, message=decision.message, preempted_by=by
            )
            changes.append(Change(index, Happened.PREEMPTED, message))
            continue
        out[index] = msgspec.structs.replace(instance, message=decision.message)
    return out, changes


def placement(
    states: Mapping[int, InstanceStatus], unplaced: Mapping[int, str]
) -> dict[int, InstanceStatus]:
    """The instances with what their gang scheduler says: an admitted instance waiting for its
    pods gets why the scheduler cannot place it whole as its message (none: no message)."""
    return {
        index: msgspec.structs.replace(instance, message=unplaced.get(index))
        if instance.phase is GangPhase.WAITING_FOR_READY
        else instance
        for index, instance in states.items()
    }


def _members(holds: Mapping[str, MemberHold]) -> list[MemberAdmission]:
    return [
        MemberAdmission(name=name, flavor=flavor, replicas=count)
        for name, (flavor, count) in holds.items()
    ]


def unpooled(group: ActorGroup, ready: Mapping[int, bool]) -> dict[int, InstanceStatus]:
    """The instances of a group without a pool: each one desired runs at full size."""
    known = known_instances(group)
    members = [
        MemberAdmission(name=m.name, flavor=m.template.flavor, replicas=m.replicas)
        for m in group.spec.members
    ]
    out = {}
    for index in range(desired_instances(group)):
        phase = GangPhase.READY if ready.get(index, False) else GangPhase.WAITING_FOR_READY
        before = known.get(index, InstanceStatus(instance=index))
        out[index] = msgspec.structs.replace(before, phase=phase, members=members, message=None)
    return out


def next_deadline(group: ActorGroup, states: Mapping[int, InstanceStatus]) -> float | None:
    """When (Unix seconds) a pass must look at the group again though nothing else changes: an
    admitted instance's readiness deadline, a backed-off one's requeue time."""
    if group.spec.pool is None:
        return None
    timeout = float(group.spec.readiness_timeout_seconds)
    deadlines: list[float] = []
    for instance in states.values():
        admitted_at = _seconds(instance.admitted_at)
        if instance.phase is GangPhase.WAITING_FOR_READY and admitted_at is not None:
            deadlines.append(admitted_at + timeout)
        requeue_at = _seconds(instance.requeue_at)
        if instance.phase is GangPhase.BACKING_OFF and requeue_at is not None:
            deadlines.append(requeue_at)
    return min(deadlines, default=None)


def holding(states: Mapping[int, InstanceStatus]) -> list[int]:
    """The instances that hold quota and run pods, in order."""
    return sorted(i for i, s in states.items() if s.phase in HOLDING)


def sizes(instance: InstanceStatus, members: Sequence[str]) -> dict[str, int]:
    """The replicas each member of an admitted instance runs (0 for one not admitted)."""
    counts = {m.name: m.replicas for m in instance.members or ()}
    return {name: counts.get(name, 0) for name in members}
