"""How many replicas of each elastic AsyncActor its pool admits: KEDA proposes, admission disposes.

Pure: CRs and the actors' current standing in, one decision per actor out; no kopf, no I/O.
The controller reads the cluster, calls `admit_actors`, sets each Deployment to the admitted
count and records it in the actor's status (the next pass reads it back as `admitted`).

The model. Each replica of an AsyncActor with `spec.pool` is one workload of one pod (pod set
`replica`, count 1, the actor's per-replica cpu, memory and nvidia.com/gpu), at the actor's
priority. Replica-by-replica rather than one elastic workload because that is what the engine
can preempt and release one at a time: a higher-priority actor takes exactly the replicas it
needs, a scale-down gives back exactly the replicas that went, and replicas that hold quota are
never reshuffled to admit a newer actor's. Ages: an older actor's replicas are older than a
newer actor's, and within an actor a lower index is older, so the engine keeps the low indexes
and evicts the high ones first.
- Replicas `i < min(admitted, desired)` already hold quota (in `admitted_flavor`); replicas at
  or beyond `desired` do not exist, so their quota is released at once.
- A Deployment has one node selector, so every replica of an actor is restricted to one flavor:
  the actor's `flavor` if it names one; else the flavor it holds quota in; else the first of
  the pool's flavors with quota for everything it requests. Quota held in a flavor the pool no
  longer has, or other than the one the actor now names, is given up: the Deployment rolls to
  the new flavor and its replicas are admitted there afresh.
- The engine runs until nothing changes; an actor's admitted count is its replica workloads
  holding quota at the end (preempted ones no longer count), prefix or not.
- An actor that requests nothing is admitted in full, as Kueue admits a workload with no
  requests, provided its pool exists, selects its namespace and has at least one flavor.
- A pool that does not exist or does not select the actor's namespace, or requests the engine
  cannot read, admit nothing for that actor and leave the others alone. Should the scenario as
  a whole be refused (a cohort loop), no actor grows and none loses what it holds: every actor
  keeps min(admitted, desired), with the engine's reason as its message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from asya.admission.model import load_scenario
from asya.admission.quantity import parse_quantity
from asya.admission.scheduler import SimulationResult, simulate
from asya.errors import AdmissionError
from asya_operator import scenario
from asya_operator.pools import Cohort, ResourcePool
from asya_operator.resources import ActorResources

ActorKey = tuple[str, str]
"""(namespace, name) of an AsyncActor."""

_Replica = tuple[ActorKey, int]
"""An actor and the index of one of its replicas."""


@dataclasses.dataclass(frozen=True)
class PooledActor:
    """An AsyncActor with `spec.pool`, as the controller sees it at the start of a pass."""

    namespace: str
    name: str
    pool: str
    priority: int
    age: int
    """Smaller is older (the controller passes creation order)."""
    flavor: str | None
    """The flavor the AsyncActor names (spec.flavor), if any."""
    resources: ActorResources
    """Per replica."""
    desired: int
    """Replicas KEDA asks for, already clipped to min/max by the caller."""
    admitted: int
    """Replicas holding quota now (from the actor's status)."""
    admitted_flavor: str | None
    """The flavor they hold it in."""


@dataclasses.dataclass(frozen=True)
class ActorAdmission:
    """What one pass decided for one actor."""

    admitted: int
    """Replicas the Deployment may run now: 0 <= admitted <= desired."""
    flavor: str | None
    """The flavor they hold quota in (None when admitted == 0)."""
    borrowing: bool
    """Some of it is borrowed from the cohort."""
    message: str | None
    """Why not all desired replicas are admitted, in words; None when all are."""
    preempted_by: str | None
    """`namespace/name` of the actor that took quota from this one in this pass, if any."""


_NOTHING: Final = ActorAdmission(0, None, False, None, None)


def admit_actors(
    pools: Sequence[ResourcePool],
    cohorts: Sequence[Cohort],
    namespace_labels: Mapping[str, Mapping[str, str]],
    actors: Sequence[PooledActor],
) -> dict[ActorKey, ActorAdmission]:
    """One admission pass over every pooled actor: how many replicas each may run now.

    `namespace_labels` maps a namespace to its labels (its name label is added here). Keyed by
    (namespace, name), one entry per actor given, in the order given.
    """
    by_name = {p.metadata["name"]: p for p in pools}
    decided: dict[ActorKey, ActorAdmission] = {}
    gated: list[tuple[PooledActor, ResourcePool]] = []
    for actor in actors:
        pool = by_name.get(actor.pool)
        refusal = _refusal(actor, pool, namespace_labels)
        if refusal is not None or pool is None:
            decided[_key(actor)] = _refused(actor, refusal)
        else:
            gated.append((actor, pool))
    decided |= _run(pools, cohorts, namespace_labels, gated)
    return {_key(actor): decided[_key(actor)] for actor in actors}


def _key(actor: PooledActor) -> ActorKey:
    return actor.namespace, actor.name


def _refusal(
    actor: PooledActor,
    pool: ResourcePool | None,
    labels: Mapping[str, Mapping[str, str]],
) -> str | None:
    """Why no replica of `actor` can be admitted whatever the quota, if that is so."""
    if pool is None:
        return f"pool {actor.pool} does not exist (no ResourcePool of that name)"
    if not scenario.pool_selects(pool, _labels(actor.namespace, labels)):
        return (
            f"pool {actor.pool} does not admit namespace {actor.namespace}"
            " (its namespaceSelector does not select it)"
        )
    try:
        for value in scenario.requests_document(actor.resources).values():
            parse_quantity(value)
    except AdmissionError as exc:
        return f"resources: {exc}"
    return None


def _refused(actor: PooledActor, reason: str | None) -> ActorAdmission:
    if actor.desired <= 0:
        return _NOTHING
    return dataclasses.replace(
        _NOTHING, message=f"0 of {actor.desired} replicas admitted: {reason}"
    )


def _run(
    pools: Sequence[ResourcePool],
    cohorts: Sequence[Cohort],
    labels: Mapping[str, Mapping[str, str]],
    gated: Sequence[tuple[PooledActor, ResourcePool]],
) -> dict[ActorKey, ActorAdmission]:
    namespaces = {ns: _labels(ns, labels) for ns in sorted({a.namespace for a, _ in gated})}
    replicas: dict[str, _Replica] = {}
    workloads = _workloads(gated, replicas)
    document = {
        "cohorts": [scenario.cohort_document(c) for c in cohorts],
        "pools": [scenario.pool_document(p, namespaces) for p in pools],
        "workloads": workloads,
    }
    try:
        loaded = load_scenario(document)
    except AdmissionError as exc:
        return {_key(a): _held_only(a, _holds(a, p), str(exc)) for a, p in gated}
    return _read(simulate(loaded), [a for a, _ in gated], replicas)


def _labels(namespace: str, labels: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    return scenario.namespace_labels(namespace, labels.get(namespace, {}))


def _held_only(actor: PooledActor, holds: bool, reason: str) -> ActorAdmission:
    """Admission could not run: keep what is held, admit nothing more."""
    kept = min(actor.admitted, actor.desired) if holds else 0
    message = None
    if kept < actor.desired:
        message = f"{kept} of {actor.desired} replicas admitted: admission cannot run: {reason}"
    return ActorAdmission(kept, actor.admitted_flavor if kept else None, False, message, None)


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


def _flavor(actor: PooledActor, pool: ResourcePool) -> str | None:
    """The one flavor every replica of `actor` is restricted to; None: the pool has no flavor
    covering its requests (the engine then says so)."""
    if actor.flavor is not None:
        return actor.flavor
    if _holds(actor, pool):
        return actor.admitted_flavor
    wanted = set(scenario.requests_document(actor.resources))
    for quotas in pool.spec.quotas or ():
        if wanted <= {q.name for q in quotas.resources}:
            return quotas.flavor
    return None


def _workloads(
    gated: Sequence[tuple[PooledActor, ResourcePool]], replicas: dict[str, _Replica]
) -> list[dict[str, Any]]:
    """One workload per replica, older actors' first; fills `replicas` (workload -> replica)."""
    workloads: list[dict[str, Any]] = []
    for actor, pool in sorted(gated, key=lambda g: (g[0].age, g[0].namespace, g[0].name)):
        flavor = _flavor(actor, pool)
        held = min(actor.admitted, actor.desired) if _holds(actor, pool) else 0
        pod_set: dict[str, Any] = {
            "name": scenario.ACTOR_POD_SET,
            "count": 1,
            "requests": scenario.requests_document(actor.resources),
        }
        if flavor is not None:
            pod_set["flavors"] = [flavor]
        for index in range(max(0, actor.desired)):
            name = f"{actor.namespace}/{actor.name}#{index}"
            replicas[name] = (_key(actor), index)
            workload = {
                "name": name,
                "pool": actor.pool,
                "namespace": actor.namespace,
                "priority": actor.priority,
                "created": len(workloads),
                "podSets": [pod_set],
            }
            if index < held:
                workload["admitted"] = [
                    {"podSet": scenario.ACTOR_POD_SET, "flavor": flavor, "count": 1}
                ]
            workloads.append(workload)
    return workloads


def _read(
    result: SimulationResult, actors: Sequence[PooledActor], replicas: Mapping[str, _Replica]
) -> dict[ActorKey, ActorAdmission]:
    """Each actor's decision from the engine's end state."""
    admitted: dict[ActorKey, list[int]] = {_key(a): [] for a in actors}
    flavor: dict[ActorKey, str] = {}
    borrowing: set[ActorKey] = set()
    for held in result.admitted:
        key, index = replicas[held.workload]
        admitted[key].append(index)
        flavor.setdefault(key, held.pod_sets[0][1])
        if held.borrowing:
            borrowing.add(key)
    preempted_by = _preemptors(result, replicas, admitted)
    pending = {p.workload: p.message for p in result.pending}
    decided = {}
    for actor in actors:
        key = _key(actor)
        count = len(admitted[key])
        decided[key] = ActorAdmission(
            admitted=count,
            flavor=flavor.get(key),
            borrowing=key in borrowing,
            message=_message(actor, set(admitted[key]), pending),
            preempted_by=preempted_by.get(key),
        )
    return decided


def _preemptors(
    result: SimulationResult,
    replicas: Mapping[str, _Replica],
    admitted: Mapping[ActorKey, list[int]],
) -> dict[ActorKey, str]:
    """The first actor to take a replica this actor did not get back by the end of the pass."""
    preempted_by: dict[ActorKey, str] = {}
    for eviction in result.preempted:
        key, index = replicas[eviction.workload]
        by = replicas[eviction.preemptor][0]
        if index in admitted[key] or key in preempted_by or by == key:
            continue
        preempted_by[key] = f"{by[0]}/{by[1]}"
    return preempted_by


def _message(actor: PooledActor, admitted: set[int], pending: Mapping[str, str]) -> str | None:
    """How many wait, and the engine's reason for the first that does; None when none does."""
    waiting = [i for i in range(actor.desired) if i not in admitted]
    if not waiting:
        return None
    reason = pending[f"{actor.namespace}/{actor.name}#{waiting[0]}"]
    return f"{len(admitted)} of {actor.desired} replicas admitted, {len(waiting)} waiting: {reason}"
