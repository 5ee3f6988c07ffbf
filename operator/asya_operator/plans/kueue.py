"""Kueue as the admission of actors and gangs (the operator's `admission: kueue`): what the
objects carry for Kueue, and Kueue's decisions read back into asya's statuses.

asya then admits nothing itself: its ResourcePools and Cohorts are not read, and a pool's
name (an object's own `spec.pool`, else its namespace's `asya.sh/default-pool` label) is the
name of a Kueue LocalQueue in the object's namespace. Then:

- an AsyncActor's Deployment runs its desired replicas and carries the label
  `kueue.x-k8s.io/queue-name` (none without a pool: Kueue's own defaulting puts its pods in the
  `default` LocalQueue where one exists): Kueue's Deployment integration makes each pod a
  workload of its own, held at the scheduling gate `kueue.x-k8s.io/admission` until Kueue
  admits it (admitted, scaled out and in pod by pod). `actor_status.kueue_admission` counts
  its admitted pods' Workloads;
- each desired ActorGroup instance runs its StatefulSets at full size, and its member pods are
  one Kueue pod group, as Kueue's own StatefulSet and LeaderWorkerSet integrations make them:
  the labels `kueue.x-k8s.io/queue-name`, `kueue.x-k8s.io/pod-group-name: {group}-{instance}`
  and `kueue.x-k8s.io/managed: "true"`, the annotations `kueue.x-k8s.io/pod-group-total-count`
  (the instance's pod count), `kueue.x-k8s.io/pod-suspending-parent: asya` (a parent suspends
  them: Kueue's StatefulSet webhook leaves the StatefulSets alone, and the pods get Kueue's gate
  but not its finalizer, so a StatefulSet can replace an evicted pod),
  `kueue.x-k8s.io/pod-group-serving: "true"` (a long-running group: a pod that exits is
  replaced, not counted as finished) and `kueue.x-k8s.io/role-hash: {member}` (one pod set per
  member, so Kueue assigns each its flavor). Kueue admits the instance's pods together, as one
  Workload named `{group}-{instance}`, owned by its pods (it goes with them), whole or not at
  all. `instance_from_workload` reads that Workload back.

Pure: dicts and typed statuses in and out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from asya.admission.readiness import GangPhase
from asya_operator.api.group import ActorGroup, InstanceStatus, MemberAdmission

QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
POD_GROUP_LABEL: Final = "kueue.x-k8s.io/pod-group-name"
MANAGED_LABEL: Final = "kueue.x-k8s.io/managed"
POD_GROUP_TOTAL_ANNOTATION: Final = "kueue.x-k8s.io/pod-group-total-count"
PARENT_ANNOTATION: Final = "kueue.x-k8s.io/pod-suspending-parent"
SERVING_ANNOTATION: Final = "kueue.x-k8s.io/pod-group-serving"
ROLE_HASH_ANNOTATION: Final = "kueue.x-k8s.io/role-hash"
PARENT: Final = "asya"
"""What the pods' parent is called to Kueue: any name but its own integrations' ("statefulset")."""
ADMISSION_GATE: Final = "kueue.x-k8s.io/admission"
"""The scheduling gate Kueue's webhook puts on each pod it manages, and lifts on admission."""
DEFAULT_LOCAL_QUEUE: Final = "default"


def local_queue(pool: str | None) -> str:
    """The LocalQueue of an object whose effective pool is `pool`."""
    return pool or DEFAULT_LOCAL_QUEUE


def queue_deployment(deployment: dict[str, Any], pool: str | None) -> None:
    """Put the actor's Deployment (changed in place) in the LocalQueue of `pool` (none: left
    to Kueue's defaulting)."""
    if pool is not None:
        deployment["metadata"].setdefault("labels", {})[QUEUE_LABEL] = pool


def queue_instance(
    statefulsets: Sequence[dict[str, Any]], members: Sequence[str], name: str, pool: str | None
) -> None:
    """Make one Kueue pod group, `name`, of an instance's member pods (the `statefulsets`'
    templates, one per member of `members`, changed in place)."""
    total = sum(int(s["spec"]["replicas"]) for s in statefulsets)
    for statefulset, member in zip(statefulsets, members, strict=True):
        meta = statefulset["spec"]["template"]["metadata"]
        meta["labels"] |= {
            QUEUE_LABEL: local_queue(pool),
            POD_GROUP_LABEL: name,
            MANAGED_LABEL: "true",
        }
        meta.setdefault("annotations", {}).update(
            {
                POD_GROUP_TOTAL_ANNOTATION: str(total),
                PARENT_ANNOTATION: PARENT,
                SERVING_ANNOTATION: "true",
                ROLE_HASH_ANNOTATION: member,
            }
        )


def conditions_of(workload: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """A Workload's conditions by type."""
    found = (workload.get("status") or {}).get("conditions") or ()
    return {str(c.get("type")): c for c in found}


def is_admitted(workload: Mapping[str, Any]) -> bool:
    return conditions_of(workload).get("Admitted", {}).get("status") == "True"


def waiting_words(workload: Mapping[str, Any]) -> str:
    """Why Kueue has not admitted a Workload, in Kueue's words (its condition messages)."""
    conditions = conditions_of(workload)
    for kind, value in (("Evicted", "True"), ("QuotaReserved", "False"), ("Admitted", "False")):
        condition = conditions.get(kind)
        if condition is not None and condition.get("status") == value:
            words = condition.get("message") or condition.get("reason") or kind
            prefix = "evicted by Kueue" if kind == "Evicted" else "waiting for Kueue"
            return f"{prefix}: {words}"
    return "waiting for Kueue to admit it"


def flavors_of(workload: Mapping[str, Any], pod_set: str | None = None) -> list[str]:
    """The flavors Kueue assigned the Workload's pod sets (or the one named `pod_set`), in
    order, once each."""
    admission = (workload.get("status") or {}).get("admission") or {}
    found: list[str] = []
    for assignment in admission.get("podSetAssignments") or ():
        if pod_set is not None and assignment.get("name") != pod_set:
            continue
        for flavor in (assignment.get("flavors") or {}).values():
            if flavor not in found:
                found.append(str(flavor))
    return found


def is_finished(workload: Mapping[str, Any]) -> bool:
    return conditions_of(workload).get("Finished", {}).get("status") == "True"


def instance_from_workload(
    group: ActorGroup, instance: InstanceStatus, workload: Mapping[str, Any] | None, *, ready: bool
) -> InstanceStatus:
    """An instance as Kueue's Workload `{group}-{instance}` says (None: Kueue has made none
    yet): admitted (WaitingForReady, or Ready once every pod is), else Pending with Kueue's
    words; the flavor its quota is in where Kueue assigned one."""
    name = f"{group.metadata['name']}-{instance.instance}"
    if workload is None and ready:
        message = (
            f"running without Kueue's admission: Kueue made no Workload {name}, so it does not"
            " manage this namespace's pods (its managedJobsNamespaceSelector)"
        )
        return msgspec.structs.replace(instance, phase=GangPhase.READY, message=message)
    if workload is None:
        message = (
            f"waiting for Kueue: no Workload {name} yet (Kueue makes it once all the"
            " instance's pods exist; does Kueue manage pods in this namespace?)"
        )
        return msgspec.structs.replace(
            instance, phase=GangPhase.PENDING, members=None, message=message
        )
    if not is_admitted(workload):
        return msgspec.structs.replace(
            instance, phase=GangPhase.PENDING, members=None, message=waiting_words(workload)
        )
    members = [
        MemberAdmission(
            name=m.name, flavor=", ".join(flavors_of(workload, m.name)) or None, replicas=m.replicas
        )
        for m in group.spec.members
    ]
    phase = GangPhase.READY if ready else GangPhase.WAITING_FOR_READY
    return msgspec.structs.replace(instance, phase=phase, members=members, message=None)


def actor_workloads(actor: str, workloads: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The Workloads Kueue made for the pods of the actor's Deployment, not finished (each owned
    by its pod, named `{actor}-{pod-template-hash}-{suffix}`: the hash and suffix have no dash,
    so another actor whose name starts with this one's never matches; where that is longer than
    63 characters, Kubernetes cuts the ReplicaSet's part to 58 and appends the suffix)."""
    found = []
    for workload in workloads:
        if is_finished(workload):
            continue
        owners = (workload.get("metadata") or {}).get("ownerReferences") or ()
        if any(o.get("kind") == "Pod" and is_actor_pod(actor, str(o.get("name"))) for o in owners):
            found.append(workload)
    return found


def is_actor_pod(actor: str, pod: str) -> bool:
    """Whether `pod` is a name the actor's Deployment gives its pods."""
    if re.fullmatch(rf"{re.escape(actor)}-[a-z0-9]+-[a-z0-9]+", pod):
        return True
    # Cut: `({actor}-{hash}-)[:58]` and 5 characters, so no dash after the actor's name (or, for
    # a name of 58 or more, the name's first 58 characters and 5).
    cut = f"{actor}-"[:_GENERATED_BASE]
    return len(pod) == _GENERATED_BASE + 5 and pod.startswith(cut) and "-" not in pod[len(cut) :]


_GENERATED_BASE: Final = 58
"""What Kubernetes keeps of a `generateName` (a ReplicaSet's name and a dash) before the five
random characters it appends."""
