"""The admission scenario a set of CRs describes, and its decisions as `asya-operator plan` prints.

Pure: typed CRs in, a `asya.admission` Scenario out (in the very format `asya admission
simulate` reads, then loaded by the engine's own loader), and the engine's result out as the
commented YAML `plan` appends. The what-if is "every queue asks for its max":
- each AsyncActor with a `pool` is an elastic workload: one pod set of `scaling.maxReplicas`
  pods, admitted with fewer if that is what fits, but at least max(1, minReplicas);
- each ActorGroup instance (`scaling.maxReplicas` of them for a group that scales, else
  `spec.replicas`, by default 1) is a gang workload: one pod set per
  member, whole (or each member at its minReplicas) or not at all; an instance that its
  `status.instances` shows admitted already holds that quota;
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

from asya.admission.model import Scenario, load_scenario
from asya.admission.scheduler import SimulationResult
from asya.errors import AdmissionError
from asya_operator.api.group import GroupMember, desired_instances, known_instances
from asya_operator.api.group import held as held_quota
from asya_operator.api.metadata import actor_name
from asya_operator.plans.files import CrError, Crs
from asya_operator.plans.quota import (
    ACTOR_POD_SET,
    cohort_document,
    namespace_labels,
    pool_document,
    requests_document,
    workload_name,
)

_HEADER: Final = """\
# ==== Admission what-if (offline) ========================================================
# Every AsyncActor with a pool asks for scaling.maxReplicas replicas (admitted with fewer if
# that is what fits, at least max(1, minReplicas)); every ActorGroup asks for its instances
# (scaling.maxReplicas of them if it scales), each with all its members at once (whole or not
# at all). Quota: the ResourcePools and Cohorts in the files;
# an admitted instance in an ActorGroup's status.instances holds its quota already. Nothing
# here is applied: on a cluster the controller admits as KEDA asks (each AsyncActor replica by
# replica, each ActorGroup instance whole), and evicts gangs that do not become ready.
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

    scenario: Scenario
    origins: dict[str, WorkloadOrigin]


def snapshot_of(crs: Crs) -> Snapshot:
    """The admission scenario `crs` describe, checked by the engine's own loader.

    Raises:
        CrError: the engine refuses the scenario (a cohort loop, an admitted flavor the pool
            lacks, ...); the message is the engine's.
    """
    origins: dict[str, WorkloadOrigin] = {}
    workloads = _actor_workloads(crs, origins) + _group_workloads(crs, origins)
    workloads.sort(key=lambda w: w["created"])
    namespaces = _namespace_labels(crs, origins.values())
    document = {
        "cohorts": [cohort_document(c) for c in crs.cohorts.values()],
        "pools": [pool_document(p, namespaces) for p in crs.pools.values()],
        "workloads": workloads,
    }
    try:
        return Snapshot(load_scenario(document), origins)
    except AdmissionError as exc:
        raise CrError(f"the admission scenario of these files: {exc}") from exc


def _actor_workloads(crs: Crs, origins: dict[str, WorkloadOrigin]) -> list[dict[str, Any]]:
    workloads = []
    for namespace, actor in crs.actors:
        spec = actor.spec
        if spec.pool is None:
            continue  # not gated by admission
        name = workload_name(namespace, actor_name(actor))
        origins[name] = WorkloadOrigin("AsyncActor", namespace, actor_name(actor))
        pod_set = {
            "name": ACTOR_POD_SET,
            "count": spec.scaling.max_replicas,
            # Elastic: KEDA keeps minReplicas running, and one replica is worth admitting.
            "minCount": max(1, spec.scaling.min_replicas),
            "requests": requests_document(spec.resources),
        }
        if spec.flavor is not None:  # its Deployment is placed by that flavor alone
            pod_set["flavors"] = [spec.flavor]
        created = crs.ages["AsyncActor", namespace, actor_name(actor)]
        workloads.append(_workload(name, spec.pool, namespace, spec.priority, created, [pod_set]))
    return workloads


def _group_workloads(crs: Crs, origins: dict[str, WorkloadOrigin]) -> list[dict[str, Any]]:
    workloads = []
    for namespace, group in crs.groups:
        spec, group_name = group.spec, group.metadata["name"]
        if spec.pool is None:
            continue
        held = {i: held_quota(s) for i, s in known_instances(group).items()}
        held = {i: members for i, members in held.items() if members}
        created = crs.ages["ActorGroup", namespace, group_name]
        # An instance beyond spec.replicas that still holds quota keeps it until it is stopped.
        asked = spec.scaling.max_replicas if spec.scaling else desired_instances(group)
        for instance in sorted(set(range(asked)) | set(held)):
            name = workload_name(namespace, group_name, instance)
            origins[name] = WorkloadOrigin("ActorGroup", namespace, group_name, instance)
            pod_sets = [_member_pod_set(m) for m in spec.members]
            workload = _workload(name, spec.pool, namespace, spec.priority, created, pod_sets)
            if instance in held:
                workload["admitted"] = [
                    {"podSet": member, "flavor": flavor, "count": count}
                    for member, (flavor, count) in held[instance].items()
                ]
            workloads.append(workload)
    return workloads


def _member_pod_set(member: GroupMember) -> dict[str, Any]:
    pod_set: dict[str, Any] = {
        "name": member.name,
        "count": member.replicas,
        "requests": requests_document(member.template.resources),
    }
    if member.min_replicas is not None:
        pod_set["minCount"] = member.min_replicas
    if member.template.flavor is not None:
        pod_set["flavors"] = [member.template.flavor]
    return pod_set


def _workload(
    name: str,
    pool: str,
    namespace: str,
    priority: int,
    created: int,
    pod_sets: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "name": name,
        "pool": pool,
        "namespace": namespace,
        "priority": priority,
        "created": created,
        "podSets": pod_sets,
    }


def _namespace_labels(crs: Crs, origins: Iterable[WorkloadOrigin]) -> dict[str, dict[str, str]]:
    known = {o.namespace for o in origins} | set(crs.namespace_labels)
    return {ns: namespace_labels(ns, crs.namespace_labels.get(ns, {})) for ns in sorted(known)}


def decisions(snapshot: Snapshot, result: SimulationResult) -> dict[str, Any]:
    """The engine's result in `asya admission simulate`'s shape, each workload with its kind
    (and pool). A pod set whose CR names a flavor is kept to it, as on the cluster."""
    kinds = {name: origin.kind for name, origin in snapshot.origins.items()}
    pools = {w.name: w.pool for w in snapshot.scenario.workloads}
    admitted = []
    for a in result.admitted:
        pod_sets = [{"name": n, "flavor": f, "count": c} for n, f, c in a.pod_sets]
        entry: dict[str, Any] = {"workload": a.workload, "kind": kinds[a.workload], "pool": a.pool}
        entry |= {"borrowing": a.borrowing, "podSets": pod_sets}
        admitted.append(entry)
    preempted = [
        {"workload": p.workload, "kind": kinds[p.workload], "preemptor": p.preemptor}
        | {"reason": p.reason}
        for p in result.preempted
    ]
    pending = [
        {"workload": p.workload, "kind": kinds[p.workload], "pool": pools[p.workload]}
        | {"reason": p.reason.value, "message": p.message}
        for p in result.pending
    ]
    return {
        "admitted": admitted,
        "preempted": preempted,
        "pending": pending,
        "cycles": result.cycles,
        "quiescent": result.quiescent,
    }


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
        + "\n#\n"
    )
    shown = dict(decided)
    shown["admitted"] = [
        entry | {"podSets": [_OneLine(ps) for ps in entry["podSets"]]}
        for entry in decided["admitted"]
    ]
    body = yaml.dump(shown, Dumper=_Dumper, sort_keys=False, width=96)
    return _HEADER + summary + "".join(f"# {line}\n" for line in body.splitlines())
