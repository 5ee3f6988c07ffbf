"""What a pool's quota admits now: each elastic AsyncActor's replicas and each ActorGroup's gang
instances. KEDA proposes, admission disposes.

Pure: CRs and the workloads' current standing in, one decision per actor and per gang instance
out; no kopf, no I/O. The controller reads the cluster, calls `admit`, sets each Deployment and
StatefulSet to what was admitted and records it in the status (the next pass reads it back).

The model. Both kinds become workloads of one `asya.admission` scenario, so one engine run
weighs them against each other (priority, age, borrowing, preemption):
- Each replica of an AsyncActor with `spec.pool` is one workload of one pod (pod set `replica`,
  count 1, the actor's per-replica cpu, memory and nvidia.com/gpu), at the actor's priority.
  Replica by replica because that is what the engine can preempt and release one at a time: a
  higher-priority actor takes exactly the replicas it needs, a scale-down gives back exactly
  the replicas that went, and replicas that hold quota are never reshuffled. Within an actor a
  lower index is older, so the engine keeps the low indexes and evicts the high ones first.
  Replicas `i < min(admitted, desired)` already hold quota (in `admitted_flavor`); replicas at
  or beyond `desired` do not exist, so their quota is released at once. A Deployment has one
  node selector, so every replica of an actor is restricted to one flavor: the one the actor
  names; else the one it holds quota in; else the first of the pool's flavors with quota for
  everything it requests, in the order the engine tries flavors for those requests
  (`asya.admission.accelerators.in_preferred_order`: for an actor that asks for no
  accelerator, flavors without accelerators first). So a CPU-only actor goes to a CPU flavor
  when the pool has one covering its requests, and waits for room there rather than spill onto
  accelerator nodes: one flavor per actor, chosen before the run. Quota held in a flavor the
  pool no longer has, or other than the one the actor now names, is given up. Where replicas
  that ask for no accelerator hold quota in a flavor that offers them all the same (the actor
  names it, no other flavor covers it, or it was held there), the decision carries the
  engine's `AcceleratorFallback` message; so does a gang instance's, per member.
- Each gang instance of an ActorGroup with `spec.pool` is one workload with one pod set per
  member (its replicas, or down to its minReplicas), admitted whole or not at all. The caller
  says which instances ask for quota (`pending`) and which hold it (`held`, with each member's
  flavor and count): an instance backing off after an eviction is in neither. A held instance
  whose quota no longer fits its CR (a flavor the pool lost, a member renamed or re-flavored)
  gives it up and asks again. Lower instance indexes are older.
- Age across workloads: the caller's `age` (creation order) first, then the index.
- The engine gets a typed snapshot (`asya.admission.model.build_scenario`: the CRs' own quota
  types, checked as a scenario file is), runs until nothing changes; what holds quota at the
  end is admitted.
- A waiting actor's message says what one more replica requests (the engine's numbers are one
  replica's) and the engine's reason for the first waiting one; when its pool never reclaims
  (`reclaimWithinCohort: Never`) and lent its cohort what that replica lacks, it says so.
- A workload that requests nothing is admitted in full, as Kueue admits one, provided its pool
  exists, selects its namespace and has a flavor. A pool that does not exist or does not select
  the namespace, or requests the engine cannot read, admit nothing for that actor or group and
  leave the others alone. Should the scenario as a whole be refused (a cohort loop), nothing
  grows and nothing held is lost: the engine's reason is every waiting workload's message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import msgspec

from asya.admission import model
from asya.admission.accelerators import in_preferred_order
from asya.admission.quantity import Milli, format_quantity
from asya.admission.quotas import ReclaimWithinCohort
from asya.admission.scheduler import AdmittedResult, SimulationResult, simulate
from asya.errors import AdmissionError
from asya_operator.api.group import MemberHold
from asya_operator.api.pool import Cohort, ResourcePool
from asya_operator.api.template import ActorResources
from asya_operator.plans import quota
from asya_operator.plans.workloads import (
    ActorAdmission,
    Decisions,
    InstanceAdmission,
    PooledActor,
    PooledGroup,
    PooledMember,
)


@dataclasses.dataclass(frozen=True)
class _Origin:
    """The actor replica or gang instance a workload of the scenario stands for."""

    key: tuple[str, str]
    index: int
    is_group: bool

    @property
    def label(self) -> str:
        namespace, name = self.key
        return f"{namespace}/{name}[{self.index}]" if self.is_group else f"{namespace}/{name}"


_NOTHING: Final = ActorAdmission(0, None, False, None, None)


def admit(
    pools: Sequence[ResourcePool],
    cohorts: Sequence[Cohort],
    namespace_labels: Mapping[str, Mapping[str, str]],
    actors: Sequence[PooledActor],
    groups: Sequence[PooledGroup] = (),
) -> Decisions:
    """One admission pass over every pooled actor and group: what each may run now.

    `namespace_labels` maps a namespace to its labels (its name label is added here). Keyed by
    (namespace, name), one entry per actor and group given, in the order given.
    """
    by_name = {p.metadata["name"]: p for p in pools}
    decided = Decisions(actors={}, groups={})
    gated_actors: list[tuple[PooledActor, ResourcePool]] = []
    gated_groups: list[tuple[PooledGroup, ResourcePool]] = []
    for actor in actors:
        pool = by_name.get(actor.pool)
        refusal = _refusal(actor.namespace, actor.pool, pool, namespace_labels, [actor.resources])
        if refusal is not None or pool is None:
            decided.actors[_key(actor)] = _refused(actor, refusal)
        else:
            gated_actors.append((actor, pool))
    for group in groups:
        pool = by_name.get(group.pool)
        requests = [m.resources for m in group.members]
        refusal = _refusal(group.namespace, group.pool, pool, namespace_labels, requests)
        if refusal is not None or pool is None:
            decided.groups[_key(group)] = _instances_refused(group, refusal)
        else:
            gated_groups.append((group, pool))
    ran = _run(pools, cohorts, namespace_labels, gated_actors, gated_groups)
    return Decisions(
        actors={_key(a): (decided.actors | ran.actors)[_key(a)] for a in actors},
        groups={_key(g): (decided.groups | ran.groups)[_key(g)] for g in groups},
    )


def _key(workload: PooledActor | PooledGroup) -> tuple[str, str]:
    return workload.namespace, workload.name


def _refusal(
    namespace: str,
    pool_name: str,
    pool: ResourcePool | None,
    labels: Mapping[str, Mapping[str, str]],
    requests: Iterable[ActorResources],
) -> str | None:
    """Why nothing of a workload can be admitted whatever the quota, if that is so."""
    if pool is None:
        return f"pool {pool_name} does not exist (no ResourcePool of that name)"
    if not quota.pool_selects(pool, _labels(namespace, labels)):
        return (
            f"pool {pool_name} does not admit namespace {namespace}"
            " (its namespaceSelector does not select it)"
        )
    try:
        for resources in requests:
            quota.requests_of(resources)
    except AdmissionError as exc:
        return f"resources: {exc}"
    return None


def _refused(actor: PooledActor, reason: str | None) -> ActorAdmission:
    if actor.desired <= 0:
        return _NOTHING
    return dataclasses.replace(
        _NOTHING, message=f"0 of {actor.desired} replicas admitted: {reason}"
    )


def _instances_refused(group: PooledGroup, reason: str | None) -> dict[int, InstanceAdmission]:
    """Nothing admitted, held quota included: every instance waits with the reason."""
    return {i: InstanceAdmission(None, message=reason) for i in _instances(group)}


def _instances(group: PooledGroup) -> list[int]:
    return sorted(set(group.pending) | set(group.held))


def _run(
    pools: Sequence[ResourcePool],
    cohorts: Sequence[Cohort],
    labels: Mapping[str, Mapping[str, str]],
    actors: Sequence[tuple[PooledActor, ResourcePool]],
    groups: Sequence[tuple[PooledGroup, ResourcePool]],
) -> Decisions:
    spaces = {a.namespace for a, _ in actors} | {g.namespace for g, _ in groups}
    namespaces = {ns: _labels(ns, labels) for ns in sorted(spaces)}
    origins: dict[str, _Origin] = {}
    ordered: list[tuple[int, int, str, model.Workload]] = []
    for actor, pool in actors:
        for index, workload in enumerate(_actor_workloads(actor, pool)):
            origins[workload.name] = _Origin(_key(actor), index, is_group=False)
            ordered.append((actor.age, index, workload.name, workload))
    for group, pool in groups:
        for index, workload in _group_workloads(group, pool):
            origins[workload.name] = _Origin(_key(group), index, is_group=True)
            ordered.append((group.age, index, workload.name, workload))
    ordered.sort(key=lambda item: item[:3])
    try:
        scenario = model.build_scenario(
            cohorts=[quota.cohort_of(c) for c in cohorts],
            pools=[quota.pool_of(p, namespaces) for p in pools],
            workloads=[msgspec.structs.replace(w, created=n) for n, (*_, w) in enumerate(ordered)],
        )
    except AdmissionError as exc:
        return _held_only(actors, groups, str(exc))
    result = simulate(scenario)
    lent = quota.lent(pools, _usage(result, scenario), cohorts)
    return _read(result, actors, groups, origins, lent)


def _labels(namespace: str, labels: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    return quota.namespace_labels(namespace, labels.get(namespace, {}))


def _held_only(
    actors: Sequence[tuple[PooledActor, ResourcePool]],
    groups: Sequence[tuple[PooledGroup, ResourcePool]],
    reason: str,
) -> Decisions:
    """Admission could not run: keep what is held, admit nothing more."""
    why = f"admission cannot run: {reason}"
    decided = Decisions(actors={}, groups={})
    for actor, pool in actors:
        kept = min(actor.admitted, actor.desired) if _holds(actor, pool) else 0
        message = None
        if kept < actor.desired:
            message = f"{kept} of {actor.desired} replicas admitted: {why}"
        flavor = actor.admitted_flavor if kept else None
        decided.actors[_key(actor)] = ActorAdmission(kept, flavor, False, message, None)
    for group, pool in groups:
        held = _held_instances(group, pool)
        decided.groups[_key(group)] = {
            i: InstanceAdmission(held[i]) if i in held else InstanceAdmission(None, message=why)
            for i in _instances(group)
        }
    return decided


# --- actors ------------------------------------------------------------------------------


def _holds(actor: PooledActor, pool: ResourcePool) -> bool:
    """Whether the quota the actor's status records still counts (see the module docstring)."""
    held = actor.admitted_flavor
    return (
        actor.admitted > 0
        and held is not None
        and held in _flavors(pool)
        and actor.flavor in (None, held)
    )


def _flavors(pool: ResourcePool) -> list[str]:
    return [q.flavor for q in pool.spec.quotas or ()]


def _flavor(actor: PooledActor, pool: ResourcePool, requests: Mapping[str, Milli]) -> str | None:
    """The one flavor every replica of `actor` is restricted to; None: the pool has no flavor
    covering its requests (the engine then says so)."""
    if actor.flavor is not None:
        return actor.flavor
    if _holds(actor, pool):
        return actor.admitted_flavor
    for quotas in in_preferred_order(requests, pool.spec.quotas or ()):
        if quotas.covers(requests):
            return quotas.flavor
    return None


def _actor_workloads(actor: PooledActor, pool: ResourcePool) -> list[model.Workload]:
    """One workload per desired replica, the held ones marked admitted."""
    requests = quota.requests_of(actor.resources)
    flavor = _flavor(actor, pool, requests)
    held = min(actor.admitted, actor.desired) if _holds(actor, pool) else 0
    pod_set = model.PodSet(
        name=quota.ACTOR_POD_SET,
        count=1,
        requests=requests,
        flavors=None if flavor is None else (flavor,),
    )
    workloads = []
    for index in range(max(0, actor.desired)):
        admitted = None
        if index < held and flavor is not None:
            admitted = (
                model.PodSetAssignment(pod_set=quota.ACTOR_POD_SET, flavor=flavor, count=1),
            )
        name = f"{actor.namespace}/{actor.name}#{index}"
        workloads.append(_workload(name, actor, (pod_set,), admitted))
    return workloads


def _workload(
    name: str,
    owner: PooledActor | PooledGroup,
    pod_sets: tuple[model.PodSet, ...],
    admitted: tuple[model.PodSetAssignment, ...] | None,
) -> model.Workload:
    return model.Workload(
        name=name,
        pool=owner.pool,
        namespace=owner.namespace,
        priority=owner.priority,
        pod_sets=pod_sets,
        admitted=admitted,
    )


# --- groups ------------------------------------------------------------------------------


def _held_instances(group: PooledGroup, pool: ResourcePool) -> dict[int, dict[str, MemberHold]]:
    """The held instances whose quota still counts: every member held, each in a flavor the
    pool has and its template allows, within its replica bounds."""
    flavors = set(_flavors(pool))
    kept = {}
    for instance, held in group.held.items():
        if set(held) != {m.name for m in group.members}:
            continue
        if all(_member_holds(m, held[m.name], flavors) for m in group.members):
            kept[instance] = {m.name: held[m.name] for m in group.members}
    return kept


def _member_holds(member: PooledMember, held: MemberHold, flavors: set[str]) -> bool:
    flavor, count = held
    least = member.replicas if member.min_replicas is None else member.min_replicas
    allowed = flavor is not None and flavor in flavors and member.flavor in (None, flavor)
    return allowed and least <= count <= member.replicas


def _group_workloads(group: PooledGroup, pool: ResourcePool) -> list[tuple[int, model.Workload]]:
    """One workload per instance asking for or holding quota, the held ones marked admitted."""
    held = _held_instances(group, pool)
    pod_sets = tuple(_member_pod_set(m) for m in group.members)
    workloads = []
    for instance in _instances(group):
        name = quota.workload_name(group.namespace, group.name, instance)
        admitted = None
        if instance in held:
            admitted = tuple(
                model.PodSetAssignment(pod_set=member, flavor=str(flavor), count=count)
                for member, (flavor, count) in held[instance].items()
            )
        workloads.append((instance, _workload(name, group, pod_sets, admitted)))
    return workloads


def _member_pod_set(member: PooledMember) -> model.PodSet:
    return model.PodSet(
        name=member.name,
        count=member.replicas,
        min_count=member.min_replicas,
        requests=quota.requests_of(member.resources),
        flavors=None if member.flavor is None else (member.flavor,),
    )


# --- reading the engine's end state --------------------------------------------------------


def _read(
    result: SimulationResult,
    actors: Sequence[tuple[PooledActor, ResourcePool]],
    groups: Sequence[tuple[PooledGroup, ResourcePool]],
    origins: Mapping[str, _Origin],
    lent: Mapping[str, quota.Usage],
) -> Decisions:
    """Each actor's and instance's decision from the engine's end state (`lent`: what each
    pool's unused nominal quota lends its cohort, for the waiting actors' messages)."""
    admitted = {result_held.workload: result_held for result_held in result.admitted}
    pending = {p.workload: p.message for p in result.pending}
    preempted_by = _preemptors(result, origins, admitted)
    decided = Decisions(actors={}, groups={})
    for actor, pool in actors:
        lends = lent.get(pool.metadata["name"], {})
        decided.actors[_key(actor)] = _actor_decision(
            actor, pool, lends, admitted, pending, preempted_by
        )
    for group, _pool in groups:
        instances = {}
        for instance in _instances(group):
            name = quota.workload_name(group.namespace, group.name, instance)
            held = admitted.get(name)
            if held is None:
                instances[instance] = InstanceAdmission(
                    None, message=pending[name], preempted_by=preempted_by.get(name)
                )
            else:
                members = {member: (flavor, count) for member, flavor, count in held.pod_sets}
                instances[instance] = InstanceAdmission(
                    members,
                    borrowing=held.borrowing,
                    accelerator_fallback=_fallbacks(held, per_pod_set=True),
                )
        decided.groups[_key(group)] = instances
    return decided


def _fallbacks(held: AdmittedResult, *, per_pod_set: bool) -> str | None:
    """The engine's accelerator fallbacks of an admitted workload, in words; None: none."""
    said = [
        f"{f.pod_set}: {f.message}" if per_pod_set else f.message
        for f in held.accelerator_fallbacks
    ]
    return "; ".join(said) or None


def _actor_decision(
    actor: PooledActor,
    pool: ResourcePool,
    lent: Mapping[tuple[str, str], int],
    admitted: Mapping[str, AdmittedResult],
    pending: Mapping[str, str],
    preempted_by: Mapping[str, str],
) -> ActorAdmission:
    names = [f"{actor.namespace}/{actor.name}#{i}" for i in range(max(0, actor.desired))]
    held = [admitted[n] for n in names if n in admitted]
    waiting = [n for n in names if n not in admitted]
    message = None
    if waiting:
        message = (
            f"{len(held)} of {actor.desired} replicas admitted, {len(waiting)} waiting;"
            f" {_next_replica(actor, pool, lent, pending[waiting[0]])}"
        )
    return ActorAdmission(
        admitted=len(held),
        flavor=held[0].pod_sets[0][1] if held else None,
        borrowing=any(h.borrowing for h in held),
        message=message,
        # The first preemptor of a replica the actor did not get back by the end of the pass.
        preempted_by=next((preempted_by[n] for n in waiting if n in preempted_by), None),
        # Every replica is in one flavor for one reason: the first one's says it for all.
        accelerator_fallback=_fallbacks(held[0], per_pod_set=False) if held else None,
    )


def _preemptors(
    result: SimulationResult, origins: Mapping[str, _Origin], admitted: Mapping[str, AdmittedResult]
) -> dict[str, str]:
    """Workload -> who took its quota, for each preempted workload that did not get quota back
    by the end of the pass and was not preempted by its own actor or group."""
    preempted_by: dict[str, str] = {}
    for eviction in result.preempted:
        victim, by = origins[eviction.workload], origins[eviction.preemptor]
        if eviction.workload in admitted or eviction.workload in preempted_by:
            continue
        if by.key == victim.key and by.is_group == victim.is_group:
            continue
        preempted_by[eviction.workload] = by.label
    return preempted_by


# --- why an actor's next replica waits, in words -------------------------------------------


def _usage(result: SimulationResult, scenario: model.Scenario) -> dict[str, quota.Usage]:
    """What each pool's admitted workloads request at the end of the run."""
    pod_sets = {(w.name, ps.name): ps for w in scenario.workloads for ps in w.pod_sets}
    usage: dict[str, quota.Usage] = {}
    for held in result.admitted:
        used = usage.setdefault(held.pool, {})
        for pod_set, flavor, count in held.pod_sets:
            for resource, per_pod in pod_sets[held.workload, pod_set].requests.items():
                used[flavor, resource] = used.get((flavor, resource), 0) + per_pod * count
    return usage


def _next_replica(
    actor: PooledActor, pool: ResourcePool, lent: Mapping[tuple[str, str], int], why: str
) -> str:
    """Why the actor's next replica waits (`why`: the engine's message for it), saying what
    one replica requests (each is admitted alone: the engine's numbers are one replica's) and,
    when the pool lent what it lacks and its policy never takes lent quota back, so."""
    requests = quota.requests_of(actor.resources)
    text = f"one more replica needs {_amounts(sorted(requests.items())) or 'nothing'}: {why}"
    flavor = _flavor(actor, pool, requests)
    policy = pool.spec.preemption.reclaim_within_cohort
    if flavor is None or policy is not ReclaimWithinCohort.NEVER:
        return text
    nominal = quota.nominal(pool)
    # Lent quota blocks when what is left of the pool's own after lending is short of a replica.
    blocked = [
        (resource, lent[flavor, resource])
        for resource, per_replica in sorted(requests.items())
        if lent.get((flavor, resource), 0) > 0
        and nominal.get((flavor, resource), 0) - lent[flavor, resource] < per_replica
    ]
    if not blocked:
        return text
    return (
        f"{text}; pool {pool.metadata['name']} lent {_amounts(blocked)} of flavor {flavor} to"
        f" cohort {pool.spec.cohort} and its preemption.reclaimWithinCohort: Never does not take"
        " lent quota back: it waits for the borrowers to release it (LowerPriority or Any would"
        " reclaim it)"
    )


def _amounts(quantities: Iterable[tuple[str, int]]) -> str:
    return ", ".join(f"{format_quantity(value)} {resource}" for resource, value in quantities)
