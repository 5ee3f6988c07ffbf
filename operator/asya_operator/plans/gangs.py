"""The gang scheduler's part of an ActorGroup instance: its group object, and what each member
pod carries to join it.

asya admits an instance whole against quota (whether it may run); a gang-aware scheduler
places it whole (where). Without one, the default scheduler may bind 3 of an admitted
instance's 4 pods on fragmented nodes and leave the 4th pending, holding 3 GPUs idle until the
readiness timeout evicts the instance. With a gang scheduler (`spec.scheduling.gangScheduler`,
else the operator's `gang_scheduler`) each admitted instance gets one group object, named as
its Service (`{group}-{instance}`), whose minimum is the instance's pod count, made and deleted
with the instance's StatefulSets:

- `kubernetes`: a PodGroup of `scheduling.k8s.io/v1beta1` (Kubernetes 1.37, feature gates
  GenericWorkload and GangScheduling) with a gang policy; pods join it by
  `spec.schedulingGroup.podGroupName` and the default scheduler places them.
- `volcano`: a Volcano PodGroup (`scheduling.volcano.sh/v1beta1`) with `minMember`,
  `minResources` (the instance's total requests) and the queue; pods get `schedulerName:
  volcano` and the annotation `scheduling.k8s.io/group-name`.
- `kai`: a KAI PodGroup (`scheduling.run.ai/v2alpha2`) with `minMember` and the queue; pods get
  `schedulerName: kai-scheduler`, the annotation `pod-group-name`, the label
  `kai.scheduler/queue` and the annotation `kai.scheduler/skip-podgrouper` (KAI's pod grouper
  would otherwise group them by their StatefulSet, one gang per member).

Pure: the group, the instance's planned StatefulSets and the operator's config in; dicts out.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from asya.admission.quantity import format_quantity, parse_quantity
from asya.errors import AdmissionError
from asya_operator.api.group import ActorGroup
from asya_operator.config import GangScheduler, OperatorConfig


@dataclasses.dataclass(frozen=True)
class GangKind:
    """Where a gang scheduler's group object lives, and what it is called there."""

    group: str
    version: str
    plural: str
    scheduler_name: str | None
    """The schedulerName member pods get (None: the default scheduler's, left unset)."""
    default_queue: str | None
    """The queue a PodGroup without one goes to (None: the kind has no queue)."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


GANG_KINDS: Final[Mapping[GangScheduler, GangKind]] = {
    "kubernetes": GangKind("scheduling.k8s.io", "v1beta1", "podgroups", None, None),
    "volcano": GangKind("scheduling.volcano.sh", "v1beta1", "podgroups", "volcano", "default"),
    "kai": GangKind("scheduling.run.ai", "v2alpha2", "podgroups", "kai-scheduler", "default-queue"),
}
"""Each gang scheduler's group object (every one a namespaced `PodGroup`)."""

GANG_SCHEDULER_LABEL: Final = "asya.sh/gang-scheduler"
"""On an instance's StatefulSets: the gang scheduler their pods were made for. One that
differs from the group's now (the group, or the operator's default, changed) restarts the
instance whole: pods replaced one by one would each wait for a gang they cannot complete."""

VOLCANO_GROUP_ANNOTATION: Final = "scheduling.k8s.io/group-name"
KAI_GROUP_ANNOTATION: Final = "pod-group-name"
KAI_QUEUE_LABEL: Final = "kai.scheduler/queue"
KAI_SKIP_PODGROUPER_ANNOTATION: Final = "kai.scheduler/skip-podgrouper"


def gang_scheduler(group: ActorGroup, config: OperatorConfig) -> GangScheduler:
    """The group's gang scheduler: its own, else the operator's default."""
    scheduling = group.spec.scheduling
    if scheduling is not None and scheduling.gang_scheduler is not None:
        return scheduling.gang_scheduler
    return config.gang_scheduler


def gang_objects(
    group: ActorGroup,
    name: str,
    meta: dict[str, Any],
    statefulsets: Sequence[dict[str, Any]],
    config: OperatorConfig,
) -> list[dict[str, Any]]:
    """The instance's group object (none for `none`), named `name` with metadata `meta`, and
    its member pods (the `statefulsets`' templates, changed in place) joined to it; each
    StatefulSet labelled with the scheduler (`GANG_SCHEDULER_LABEL`)."""
    scheduler = gang_scheduler(group, config)
    for statefulset in statefulsets:
        statefulset["metadata"]["labels"][GANG_SCHEDULER_LABEL] = scheduler
    if scheduler == "none":
        return []
    kind = GANG_KINDS[scheduler]
    scheduling = group.spec.scheduling
    queue = (scheduling.queue if scheduling else None) or kind.default_queue
    pod_scheduler = (scheduling.scheduler_name if scheduling else None) or kind.scheduler_name
    size = sum(statefulset["spec"]["replicas"] for statefulset in statefulsets)
    for statefulset in statefulsets:
        template = statefulset["spec"]["template"]
        if pod_scheduler is not None:
            template["spec"]["schedulerName"] = pod_scheduler
        annotations = template["metadata"].setdefault("annotations", {})
        if scheduler == "kubernetes":
            template["spec"]["schedulingGroup"] = {"podGroupName": name}
        elif scheduler == "volcano":
            annotations[VOLCANO_GROUP_ANNOTATION] = name
        else:
            annotations[KAI_GROUP_ANNOTATION] = name
            annotations[KAI_SKIP_PODGROUPER_ANNOTATION] = "true"
            template["metadata"]["labels"][KAI_QUEUE_LABEL] = queue
    body: dict[str, Any] = {"apiVersion": kind.api_version, "kind": "PodGroup", "metadata": meta}
    if scheduler == "kubernetes":
        body["spec"] = {"schedulingPolicy": {"gang": {"minCount": size}}}
    elif scheduler == "volcano":
        body["spec"] = {"minMember": size, "queue": queue}
        with contextlib.suppress(AdmissionError):  # a quantity in a form not summed: none given
            body["spec"]["minResources"] = total_requests(statefulsets)
    else:
        meta["labels"][KAI_QUEUE_LABEL] = queue
        body["spec"] = {"minMember": size, "queue": queue}
    return [body]


def total_requests(statefulsets: Sequence[dict[str, Any]]) -> dict[str, str]:
    """What the StatefulSets' pods request together, as the scheduler counts it: each
    container's requests, a resource given only as a limit requested at its limit (as the
    API server defaults it), times the replicas."""
    total: dict[str, int] = {}
    for statefulset in statefulsets:
        replicas = statefulset["spec"]["replicas"]
        for container in statefulset["spec"]["template"]["spec"]["containers"]:
            resources = container.get("resources") or {}
            wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
            for resource, quantity in wanted.items():
                total[resource] = total.get(resource, 0) + replicas * parse_quantity(quantity)
    return {resource: format_quantity(milli) for resource, milli in sorted(total.items())}


def unplaced_reason(scheduler: GangScheduler, pod_group: Mapping[str, Any]) -> str | None:
    """Why the gang scheduler says it cannot place the instance whole, in its words (None: it
    says nothing of the kind, or it placed it), from the PodGroup's status:

    - kubernetes: the condition `PodGroupInitiallyScheduled` False (reason Unschedulable or
      SchedulerError);
    - volcano: the condition `Unschedulable` True while the group is not placed since: Volcano
      never turns it False, it adds `Scheduled` and moves the phase to Running;
    - kai: the last of `schedulingConditions` while the group does not run (its `reasons`'
      messages where the deprecated `message` is empty).
    """
    status = pod_group.get("status") or {}
    said: Mapping[str, Any] | None = None
    if scheduler == "kubernetes":
        said = _condition(status, "PodGroupInitiallyScheduled", "False")
    elif scheduler == "volcano" and status.get("phase") not in ("Running", "Completed"):
        said = _condition(status, "Unschedulable", "True")
        placed = _condition(status, "Scheduled", "True")
        if said and placed and _since(placed) >= _since(said):
            said = None
    elif scheduler == "kai" and status.get("phase") != "Running":
        said = (status.get("schedulingConditions") or [None])[-1]
    if not said:
        return None
    reasons = [str(r.get("message")) for r in said.get("reasons") or () if r.get("message")]
    words = str(said.get("message") or "; ".join(reasons) or said.get("reason") or "unschedulable")
    return f"{scheduler} cannot place it whole: {words}"


def _since(condition: Mapping[str, Any]) -> str:
    # RFC 3339 times in one zone (UTC, as Kubernetes writes them) order as strings.
    return str(condition.get("lastTransitionTime") or "")


def _condition(status: Mapping[str, Any], kind: str, value: str) -> Mapping[str, Any] | None:
    for condition in status.get("conditions") or ():
        if condition.get("type") == kind and condition.get("status") == value:
            found: Mapping[str, Any] = condition
            return found
    return None
