"""The admission scenario a set of CRs describes, and its decisions as `asya-operator plan` prints.

Pure: typed CRs in, a `asya.admission` Scenario out (built from the CRs' own quota types and
checked as a scenario file is: `asya.admission.model.build_scenario`), and the engine's result
out as the commented YAML `plan` appends, in the shape `asya admission simulate` prints.
The what-if is "every queue asks for its max":
- each AsyncActor with a pool (its `spec.pool`, else its Namespace's `asya.sh/default-pool`
  label: `pools.effective_pool`) is an elastic workload: one pod set of
  `scaling.maxReplicas` pods, admitted with fewer if that is what fits, but at least
  max(1, minReplicas);
- each ActorGroup instance (`scaling.maxReplicas` of them for a group that scales, else
  `spec.replicas`, by default 1) is a gang workload: one pod set per
  member, whole (or each member at its minReplicas) or not at all; an instance that its
  `status.instances` shows admitted already holds that quota;
- an AsyncActor or ActorGroup that asks for GPUs in no pool is no workload: admission never
  sees it, and the what-if lists it under `outsideQuota`, with the GPUs it may take;
- each ResourcePool is a pool, each Cohort a cohort; a pool's namespaceSelector is matched
  against the namespaces the files know (their Namespace objects' labels, and the
  `kubernetes.io/metadata.name` label every namespace carries);
- age is the order of the documents: earlier is older.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Final

import yaml

from asya.admission import model
from asya.admission.quantity import Milli, format_quantity
from asya.admission.scheduler import SimulationResult, result_as_dict
from asya.errors import AdmissionError
from asya_operator.api.group import ActorGroup, GroupMember, desired_instances, known_instances
from asya_operator.api.group import held as held_quota
from asya_operator.api.metadata import actor_name
from asya_operator.api.template import ActorResources
from asya_operator.plans.files import CrError, Crs
from asya_operator.plans.pools import effective_pool, gpus_per_instance, gpus_per_replica
from asya_operator.plans.quota import (
    ACTOR_POD_SET,
    GPU_RESOURCE,
    cohort_of,
    namespace_labels,
    pool_of,
    requests_of,
    workload_name,
)

_HEADER: Final = """\
# ==== Admission what-if (offline) ========================================================
# Every AsyncActor with a pool (its own, else its Namespace's asya.sh/default-pool label)
# asks for scaling.maxReplicas replicas (admitted with fewer if that is what fits, at least
# max(1, minReplicas)); every ActorGroup with one asks for its instances (scaling.maxReplicas
# of them if it scales), each with all its members at once (whole or not at all). Quota: the
# ResourcePools and Cohorts in the files; an admitted instance in an ActorGroup's
# status.instances holds its quota already. Nothing here is applied: on a cluster the
# controller admits as KEDA asks (each AsyncActor replica by replica, each ActorGroup instance
# whole), and evicts gangs that do not become ready.
#
"""


@dataclasses.dataclass(frozen=True)
class WorkloadOrigin:
    """The CR a workload stands for: an AsyncActor, or one instance of an ActorGroup."""

    kind: str
    namespace: str
    name: str
    instance: int | None = None


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The scenario, and which CR each of its workloads stands for."""

    scenario: model.Scenario
    origins: dict[str, WorkloadOrigin]
    outside_quota: tuple[OutsideQuota, ...] = ()
    """The CRs asking for GPUs in no pool, in the files' order."""


@dataclasses.dataclass(frozen=True)
class OutsideQuota:
    """An AsyncActor or ActorGroup that asks for GPUs and is in no pool: no quota bounds it."""

    origin: WorkloadOrigin
    message: str
    """What it may take, in words: "asks for 8 nvidia.com/gpu per replica, up to 50 replicas
    (400 nvidia.com/gpu)"."""


def snapshot_of(crs: Crs) -> Snapshot:
    """The admission scenario `crs` describe, checked as the engine checks a scenario file.

    Raises:
        CrError: the engine refuses the scenario (a cohort loop, an admitted flavor the pool
            lacks, requests that are not quantities, ...); the message is the engine's.
    """
    origins: dict[str, WorkloadOrigin] = {}
    try:
        workloads = _actor_workloads(crs, origins) + _group_workloads(crs, origins)
        workloads.sort(key=lambda w: w.created)
        namespaces = _namespace_labels(crs, origins.values())
        scenario = model.build_scenario(
            cohorts=[cohort_of(c) for c in crs.cohorts.values()],
            pools=[pool_of(p, namespaces) for p in crs.pools.values()],
            workloads=workloads,
        )
    except AdmissionError as exc:
        raise CrError(f"the admission scenario of these files: {exc}") from exc
    return Snapshot(scenario, origins, _outside_quota(crs))


def _actor_workloads(crs: Crs, origins: dict[str, WorkloadOrigin]) -> list[model.Workload]:
    workloads = []
    for namespace, actor in crs.actors:
        spec = actor.spec
        pool = effective_pool(actor, crs.namespace_labels.get(namespace, {}))
        if pool is None:
            continue  # not gated by admission (`_outside_quota` lists it if it asks for GPUs)
        name = workload_name(namespace, actor_name(actor))
        origins[name] = WorkloadOrigin("AsyncActor", namespace, actor_name(actor))
        pod_set = model.PodSet(
            name=ACTOR_POD_SET,
            count=spec.scaling.max_replicas,
            # Elastic: KEDA keeps minReplicas running, and one replica is worth admitting.
            min_count=max(1, spec.scaling.min_replicas),
            requests=_requests(name, spec.resources),
            # Its Deployment is placed by the flavor it names alone.
            flavors=None if spec.flavor is None else (spec.flavor,),
        )
        created = crs.ages["AsyncActor", namespace, actor_name(actor)]
        workloads.append(_workload(name, pool, namespace, spec.priority, created, (pod_set,), None))
    return workloads


def _group_workloads(crs: Crs, origins: dict[str, WorkloadOrigin]) -> list[model.Workload]:
    workloads = []
    for namespace, group in crs.groups:
        spec, group_name = group.spec, group.metadata["name"]
        pool = effective_pool(group, crs.namespace_labels.get(namespace, {}))
        if pool is None:
            continue
        held = {i: held_quota(s) for i, s in known_instances(group).items()}
        held = {i: members for i, members in held.items() if members}
        created = crs.ages["ActorGroup", namespace, group_name]
        # An instance beyond spec.replicas that still holds quota keeps it until it is stopped.
        asked = _instances_asked(group)
        for instance in sorted(set(range(asked)) | set(held)):
            name = workload_name(namespace, group_name, instance)
            origins[name] = WorkloadOrigin("ActorGroup", namespace, group_name, instance)
            pod_sets = tuple(_member_pod_set(name, m) for m in spec.members)
            admitted = None
            if instance in held:
                admitted = tuple(
                    model.PodSetAssignment(pod_set=member, flavor=str(flavor), count=count)
                    for member, (flavor, count) in held[instance].items()
                )
            workloads.append(
                _workload(name, pool, namespace, spec.priority, created, pod_sets, admitted)
            )
    return workloads


def _instances_asked(group: ActorGroup) -> int:
    """Instances the what-if asks for: `scaling.maxReplicas`, else those it desires."""
    scaling = group.spec.scaling
    return scaling.max_replicas if scaling else desired_instances(group)


def _outside_quota(crs: Crs) -> tuple[OutsideQuota, ...]:
    """The actors and groups of `crs` that ask for GPUs in no pool, oldest first."""
    found: list[tuple[int, OutsideQuota]] = []
    for namespace, actor in crs.actors:
        gpus, name = gpus_per_replica(actor), actor_name(actor)
        if gpus and effective_pool(actor, crs.namespace_labels.get(namespace, {})) is None:
            most = actor.spec.scaling.max_replicas
            words = (
                f"asks for {gpus} {GPU_RESOURCE} per replica, up to {most}"
                f" replica{'' if most == 1 else 's'}"
                f" ({gpus * most} {GPU_RESOURCE}), in no pool"
            )
            origin = WorkloadOrigin("AsyncActor", namespace, name)
            found.append((crs.ages["AsyncActor", namespace, name], OutsideQuota(origin, words)))
    for namespace, group in crs.groups:
        gpus, name = gpus_per_instance(group), group.metadata["name"]
        if gpus and effective_pool(group, crs.namespace_labels.get(namespace, {})) is None:
            most = _instances_asked(group)
            words = (
                f"asks for {gpus} {GPU_RESOURCE} per instance, up to {most}"
                f" instance{'' if most == 1 else 's'}"
                f" ({gpus * most} {GPU_RESOURCE}), in no pool"
            )
            origin = WorkloadOrigin("ActorGroup", namespace, name)
            found.append((crs.ages["ActorGroup", namespace, name], OutsideQuota(origin, words)))
    return tuple(item for _age, item in sorted(found, key=lambda f: f[0]))


def _member_pod_set(workload: str, member: GroupMember) -> model.PodSet:
    return model.PodSet(
        name=member.name,
        count=member.replicas,
        min_count=member.min_replicas,
        requests=_requests(f"{workload} member {member.name}", member.template.resources),
        flavors=None if member.template.flavor is None else (member.template.flavor,),
    )


def _requests(what: str, resources: ActorResources) -> dict[str, Milli]:
    try:
        return requests_of(resources)
    except AdmissionError as exc:
        raise AdmissionError(f"workload '{what}' requests: {exc}") from exc


def _workload(
    name: str,
    pool: str,
    namespace: str,
    priority: int,
    created: int,
    pod_sets: tuple[model.PodSet, ...],
    admitted: tuple[model.PodSetAssignment, ...] | None,
) -> model.Workload:
    return model.Workload(
        name=name,
        pool=pool,
        namespace=namespace,
        priority=priority,
        created=created,
        pod_sets=pod_sets,
        admitted=admitted,
    )


def _namespace_labels(crs: Crs, origins: Iterable[WorkloadOrigin]) -> dict[str, dict[str, str]]:
    known = {o.namespace for o in origins} | set(crs.namespace_labels)
    return {ns: namespace_labels(ns, crs.namespace_labels.get(ns, {})) for ns in sorted(known)}


def decisions(snapshot: Snapshot, result: SimulationResult) -> dict[str, Any]:
    """The engine's result in `asya admission simulate`'s shape (accelerator fallbacks
    included), each workload with its kind (and pool), and `outsideQuota` (only when some CR
    asks for GPUs in no pool). A pod set whose CR names a flavor is kept to it, as on the
    cluster."""
    kinds = {name: origin.kind for name, origin in snapshot.origins.items()}
    pools = {w.name: w.pool for w in snapshot.scenario.workloads}
    simulated: dict[str, Any] = result_as_dict(result)
    admitted = [
        {"workload": a["workload"], "kind": kinds[a["workload"]]} | a for a in simulated["admitted"]
    ]
    preempted = [
        {"workload": p["workload"], "kind": kinds[p["workload"]]} | p
        for p in simulated["preempted"]
    ]
    workloads = {w.name: w for w in snapshot.scenario.workloads}
    pending = [
        {"workload": p["workload"], "kind": kinds[p["workload"]], "pool": pools[p["workload"]]}
        | p
        | _per_replica(workloads[p["workload"]], p, kinds[p["workload"]])
        for p in simulated["pending"]
    ]
    decided = simulated | {"admitted": admitted, "preempted": preempted, "pending": pending}
    if snapshot.outside_quota:
        decided["outsideQuota"] = [
            {
                "workload": workload_name(o.origin.namespace, o.origin.name),
                "kind": o.origin.kind,
                "message": o.message,
            }
            for o in snapshot.outside_quota
        ]
    return decided


def _per_replica(workload: model.Workload, pending: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """An elastic AsyncActor's waiting message with what one replica asks for first: the
    engine's numbers are its whole range's (every replica up to maxReplicas), while on the
    cluster each replica is admitted alone (as its status says: "one more replica needs")."""
    if kind != "AsyncActor" or not pending.get("message"):
        return {}
    (pod_set,) = workload.pod_sets
    each = ", ".join(f"{format_quantity(v)} {r}" for r, v in sorted(pod_set.requests.items()))
    words = f"one replica needs {each or 'nothing'} (up to {pod_set.count} replicas)"
    return {"message": f"{words}; for all of them: {pending['message']}"}


class _OneLine(dict[str, Any]):
    """A mapping rendered on one line (a pod set's name, flavor and count)."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(
    _OneLine, lambda dumper, data: dumper.represent_mapping("tag:yaml.org,2002:map", data, True)
)


def render_decisions(decided: Mapping[str, Any]) -> str:
    """The decisions as commented YAML: readable by people, left alone by `kubectl apply`."""
    summary = (
        f"# {len(decided['admitted'])} admitted, {len(decided['pending'])} pending,"
        f" {len(decided['preempted'])} preempted, after {decided['cycles']} cycle(s)"
        + ("" if decided["quiescent"] else " (stopped before nothing changed)")
        + "\n"
    )
    outside = len(decided.get("outsideQuota", ()))
    if outside:
        summary += (
            f"# {outside} outside quota (outsideQuota): asking for GPUs in no pool, which"
            " admission never sees;\n# give each a pool, or its namespace a default pool"
            " (label asya.sh/default-pool)\n"
        )
    summary += "#\n"
    shown = dict(decided)
    shown["admitted"] = [
        entry | {"podSets": [_OneLine(ps) for ps in entry["podSets"]]}
        for entry in decided["admitted"]
    ]
    body = yaml.dump(shown, Dumper=_Dumper, sort_keys=False, width=96)
    return _HEADER + summary + "".join(f"# {line}\n" for line in body.splitlines())
