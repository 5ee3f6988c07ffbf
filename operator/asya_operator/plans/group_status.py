"""An ActorGroup's status: instances desired, admitted and ready, each instance's standing, and
conditions with reasons in words.

Pure: the group, its instances' states (`asya_operator.plans.instances`), which of them are
ready, and what it lacks in; the `status` to write out. A condition whose status did not
change keeps the time it had. Conditions:
- `QuotaReserved`: some instance holds quota (or the group has no pool);
- `Admitted`: every desired instance holds quota; else why the first waiting one waits;
- `PodsReady`: every admitted instance has all its pods ready;
- `Preempted`: an instance waits because a higher-priority workload took its quota, named;
- `Evicted`: an instance is backing off or deactivated after not becoming ready in time;
- `Degraded`: something the group needs is missing (its Secret, a flavor) or a member's actor
  name is kept by another object, an AsyncActor or another group's member (`names`);
  nothing is applied then;
- `AcceleratorsUnavailable` (only while it holds): an instance waits for its pods to be ready
  and a member's flavor's nodes advertise none of an accelerator the member asks for, named
  (`find_group_shortage`);
- `Ready`: the group does what it was asked: not Degraded, every desired instance admitted, and
  every admitted instance's pods ready (True with no instance desired). False says the first
  of these that fails, with its reason: the problem's (Degraded), Pending (as Admitted says),
  PodsNotReady (as PodsReady says). `kubectl get ag` shows it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Final

from asya.admission.readiness import GangPhase
from asya.errors import AdmissionError
from asya_operator.api.flavor import ResourceFlavor
from asya_operator.api.group import (
    HOLDING,
    REACTIVATE_ANNOTATION,
    ActorGroup,
    ActorGroupStatus,
    GroupCondition,
    InstanceStatus,
    desired_instances,
    held,
)
from asya_operator.api.metadata import group_selector
from asya_operator.config import GangScheduler
from asya_operator.plans.conditions import (
    ACCELERATORS_UNAVAILABLE,
    Problem,
    Reason,
    conditions_at,
    generation_of,
    secret_problems,
)
from asya_operator.plans.gangs import GANG_KINDS
from asya_operator.plans.names import Claim, names_taken
from asya_operator.plans.nodes import Node, lacking_accelerators
from asya_operator.plans.pools import DEFAULT_POOL_LABEL, gpus_per_instance
from asya_operator.plans.quota import GPU_RESOURCE, requests_of
from asya_operator.plans.statuses import StatusPatch


def find_group_problems(
    group: ActorGroup,
    namespace: str,
    *,
    secret_keys: Collection[str] | None,
    missing_flavors: Collection[str],
    keepers: Mapping[str, Claim],
    pool_required: bool = False,
    unserved_gang_scheduler: GangScheduler | None = None,
    kueue_missing: str | None = None,
) -> list[Problem]:
    """What `group` needs and lacks: its broker Secret (or a key of it), the flavors its
    members are placed by, its members' actor names (`names.names_taken`: none another object
    of the namespace keeps), with
    `pool_required` (the operator's `require_pool_for_accelerators`) a pool if it asks for GPUs,
    the PodGroup kind of its gang scheduler where the cluster does not serve it
    (`unserved_gang_scheduler`), and Kueue where it admits and is not installed
    (`kueue_missing`: why).

    `group` has its effective pool (`pools.with_effective_pool`); `secret_keys` are the
    Secret's keys (None: no such Secret); `keepers` who keeps each actor name of the namespace
    (`names.name_keepers`).
    """
    problems = secret_problems(namespace, group.spec.broker.secret_name, secret_keys)
    gpus = gpus_per_instance(group)
    if pool_required and gpus and group.spec.pool is None:
        problems.append(
            Problem(
                Reason.POOL_REQUIRED,
                f"asks for {gpus} {GPU_RESOURCE} per instance and has no pool, and this"
                " operator runs GPUs only under a pool's quota: set spec.pool, or label"
                f" namespace {namespace} {DEFAULT_POOL_LABEL}=<pool>",
            )
        )
    for flavor in sorted(missing_flavors):
        problems.append(
            Problem(
                Reason.FLAVOR_NOT_FOUND,
                f"ResourceFlavor {flavor} not found: create it or change the member's flavor",
            )
        )
    if kueue_missing is not None:
        problems.append(Problem(Reason.KUEUE_MISSING, kueue_missing))
    if unserved_gang_scheduler is not None:
        kind = GANG_KINDS[unserved_gang_scheduler]
        problems.append(
            Problem(
                Reason.GANG_SCHEDULER_MISSING,
                f"gang scheduler {unserved_gang_scheduler}: the cluster serves no PodGroups of"
                f" {kind.api_version}: install it, or set spec.scheduling.gangScheduler"
                " (none: the default scheduler)",
            )
        )
    taken = names_taken(group, namespace, keepers)
    problems += [Problem(Reason.NAME_TAKEN, why) for why in taken]
    return problems


def find_group_shortage(
    group: ActorGroup,
    instances: Mapping[int, InstanceStatus],
    ready: Mapping[int, bool],
    flavors: Mapping[str, ResourceFlavor],
    nodes: Sequence[Node] | None,
) -> str | None:
    """Why an instance that holds quota may not become ready: a member's flavor's nodes
    advertise none of an accelerator the member asks for (`nodes.lacking_accelerators`), for
    the first such instance and member: "instance 0, member train: ResourceFlavor h100: ...".
    None when there is none, or it cannot be told (`nodes` None: not readable; a flavor not
    in `flavors`). `ready` says which running instances have every pod ready."""
    if nodes is None:
        return None
    members = {m.name: m for m in group.spec.members}
    for index, instance in sorted(instances.items()):
        if ready.get(index, False):
            continue
        for member, (flavor, _count) in sorted(held(instance).items()):
            if flavor is None or flavor not in flavors or member not in members:
                continue
            try:
                requests = requests_of(members[member].template.resources)
            except AdmissionError:  # a quantity admission refuses says so itself
                continue
            shortage = lacking_accelerators(flavors[flavor], nodes, requests)
            if shortage is not None:
                return f"instance {index}, member {member}: {shortage.message}"
    return None


def plan_group_status(
    group: ActorGroup,
    instances: Mapping[int, InstanceStatus],
    ready: Mapping[int, bool],
    problems: Sequence[Problem],
    *,
    now: datetime,
    shortage: str | None = None,
) -> StatusPatch[ActorGroupStatus]:
    """The ActorGroup's `status`. `ready` says which running instances have every pod ready;
    `shortage` is what `find_group_shortage` found (None: nothing)."""
    desired = desired_instances(group)
    holding = sorted(i for i, s in instances.items() if s.phase in HOLDING)
    ready_instances = [i for i in holding if ready.get(i, False)]
    condition = conditions_at(
        now,
        group.status.conditions if group.status else None,
        GroupCondition,
        generation=generation_of(group.metadata),
    )
    pool = group.spec.pool
    waiting = [s for i, s in sorted(instances.items()) if i < desired and i not in holding]
    counts = f"{len(holding)} of {desired} instances admitted"
    why = counts if not waiting else f"{counts}; instance {_first_why(waiting)}"

    if pool is None:
        reserved = condition("QuotaReserved", Reason.NO_POOL, "no pool: no quota", is_true=True)
    elif holding:
        held = f"{len(holding)} instances hold quota in pool {pool}"
        reserved = condition("QuotaReserved", Reason.QUOTA_RESERVED, held, is_true=True)
    else:
        reserved = condition("QuotaReserved", Reason.PENDING, why, is_true=False)
    if waiting:
        admitted = condition("Admitted", Reason.PENDING, why, is_true=False)
    else:
        admitted = condition("Admitted", Reason.ADMITTED, counts, is_true=True)
    not_ready = [i for i in holding if i not in ready_instances]
    unplaced = [
        instances[i]
        for i in not_ready
        if instances[i].phase is GangPhase.WAITING_FOR_READY and instances[i].message
    ]
    pods_reason = Reason.GANG_NOT_PLACED if unplaced else Reason.PODS_NOT_READY
    if not_ready:
        pods = f"instances {_list(not_ready)} not ready yet"
        if unplaced:
            pods += f"; instance {unplaced[0].instance}: {unplaced[0].message}"
        if pool is not None:
            pods += f" (each evicted whole if not ready {group.spec.readiness_timeout_seconds} s"
            pods += " after its admission)"
        pods_ready = condition("PodsReady", pods_reason, pods, is_true=False)
    else:
        pods = f"{len(ready_instances)} admitted instances ready"
        pods_ready = condition("PodsReady", Reason.PODS_READY, pods, is_true=True)
    preempted_now = [s for s in waiting if s.preempted_by is not None]
    if preempted_now:
        first = preempted_now[0]
        by = f"instance {first.instance} preempted whole by {first.preempted_by}: {first.message}"
        preempted = condition("Preempted", Reason.PREEMPTED, by, is_true=True)
    else:
        preempted = condition("Preempted", Reason.NOT_PREEMPTED, "none preempted", is_true=False)
    out = [
        s for s in instances.values() if s.phase in (GangPhase.BACKING_OFF, GangPhase.DEACTIVATED)
    ]
    if out:
        first = min(out, key=lambda s: s.instance)
        reason = Reason.DEACTIVATED if first.phase is GangPhase.DEACTIVATED else Reason.EVICTED
        evicted = condition(
            "Evicted", reason, f"instance {first.instance} {first.message}", is_true=True
        )
    else:
        evicted = condition("Evicted", Reason.NOT_EVICTED, "none evicted", is_true=False)
    if problems:
        messages = "; ".join(p.message for p in problems)
        degraded = condition("Degraded", problems[0].reason, messages, is_true=True)
    else:
        degraded = condition("Degraded", Reason.AS_EXPECTED, "nothing missing", is_true=False)
    ready_now = _ready(
        condition,
        problems,
        why if waiting or len(holding) < desired else None,
        (pods_reason, pods) if not_ready else None,
        ready=f"{len(ready_instances)} of {desired} instances ready" if desired else None,
    )

    lacking = []
    if shortage is not None:
        reason = Reason.NO_ALLOCATABLE_ACCELERATORS
        lacking.append(condition(ACCELERATORS_UNAVAILABLE, reason, shortage, is_true=True))

    # Acted on in this pass (`instances.before_pass`): recorded, so it is acted on once.
    asked = (group.metadata.get("annotations") or {}).get(REACTIVATE_ANNOTATION)
    status = ActorGroupStatus(
        replicas=len(holding),
        selector=group_selector(group.metadata["name"]),
        desired=desired,
        admitted=len(holding),
        ready=len(ready_instances),
        instances=[s for _i, s in sorted(instances.items())],
        conditions=[
            ready_now,
            reserved,
            admitted,
            pods_ready,
            preempted,
            evicted,
            degraded,
            *lacking,
        ],
        reactivated=None if asked is None else str(asked),
    )
    owned = set(_PASS_OWNS) | ({"reactivated"} if asked is not None else set())
    return StatusPatch.of(status, owned)


_PASS_OWNS: Final = (
    "replicas",
    "selector",
    "desired",
    "admitted",
    "ready",
    "instances",
    "conditions",
)
"""What the admission pass writes of a group's status (its handler writes observedGeneration)."""


def plan_observed_generation(group: ActorGroup) -> StatusPatch[ActorGroupStatus]:
    """The group's generation, applied and its members' queues declared: observed now."""
    generation = group.metadata.get("generation")
    return StatusPatch.of(ActorGroupStatus(observed_generation=generation), {"observed_generation"})


def _ready(
    condition: Callable[..., GroupCondition],
    problems: Sequence[Problem],
    waiting: str | None,
    not_ready: tuple[Reason, str] | None,
    *,
    ready: str | None,
) -> GroupCondition:
    """Ready: False with the first of Degraded (`problems`), instances `waiting` for quota,
    admitted instances `not_ready` that holds; else True (`ready`: the counts; None: none
    desired)."""
    if problems:
        first = problems[0]
        return condition("Ready", first.reason, f"not ready: {first.message}", is_true=False)
    if waiting is not None:
        return condition("Ready", Reason.PENDING, waiting, is_true=False)
    if not_ready is not None:
        reason, message = not_ready
        return condition("Ready", reason, message, is_true=False)
    if ready is None:
        return condition("Ready", Reason.SCALED_TO_ZERO, "no instances wanted", is_true=True)
    return condition("Ready", Reason.INSTANCES_READY, ready, is_true=True)


def _first_why(waiting: Sequence[InstanceStatus]) -> str:
    first = waiting[0]
    return f"{first.instance} waits: {first.message or 'not admitted yet'}"


def _list(indexes: Sequence[int]) -> str:
    return ", ".join(str(i) for i in indexes)


def plan_group_refused_status(message: str, *, now: datetime) -> StatusPatch[ActorGroupStatus]:
    """The status of an ActorGroup whose stored spec the operator refuses (`message` says what
    to fix): Degraded, nothing applied."""
    # The stored spec did not decode: the generation it was refused at is not known here.
    condition = conditions_at(now, None, GroupCondition, generation=None)
    degraded = condition("Degraded", Reason.INVALID_SPEC, message, is_true=True)
    return StatusPatch.of(ActorGroupStatus(conditions=[degraded]), {"conditions"})
