"""Pools, cohorts, namespaces and requests as the admission engine's scenario has them.

Pure: typed CRs in, the documents `asya.admission.model.load_scenario` reads out (the format
`asya admission simulate` takes). Shared by the cluster's admission pass (`admission`) and the
offline what-if (`whatif`), so both describe quota the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from asya_operator.api.pool import (
    Cohort,
    FlavorQuotas,
    NamespaceSelector,
    ResourcePool,
    ResourceQuota,
)
from asya_operator.api.template import ActorResources

NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"
"""The label the API server gives every namespace: its name."""


GPU_RESOURCE: Final = "nvidia.com/gpu"
"""The resource an actor's `resources.gpus` requests."""


ACTOR_POD_SET: Final = "replica"
"""The one pod set of an AsyncActor's workload."""


def workload_name(namespace: str, name: str, instance: int | None = None) -> str:
    """`ml-a/embed` for an AsyncActor, `ml-b/train[0]` for an ActorGroup's first instance."""
    return f"{namespace}/{name}" if instance is None else f"{namespace}/{name}[{instance}]"


def requests_document(resources: ActorResources) -> dict[str, str | int]:
    """What one replica with `resources` requests, as a scenario's pod set has it."""
    requests: dict[str, str | int] = {}
    if resources.cpu is not None:
        requests["cpu"] = resources.cpu
    if resources.memory is not None:
        requests["memory"] = resources.memory
    if resources.gpus:
        requests[GPU_RESOURCE] = resources.gpus
    return requests


def namespace_labels(namespace: str, labels: Mapping[str, str]) -> dict[str, str]:
    """A namespace's labels as the API server has them: with its name under
    `kubernetes.io/metadata.name`."""
    return {**labels, NAMESPACE_NAME_LABEL: namespace}


def selects(selector: NamespaceSelector, labels: Mapping[str, str]) -> bool:
    """Whether a namespace with `labels` is one `selector` selects (metav1.LabelSelector)."""
    for key, value in (selector.match_labels or {}).items():
        if labels.get(key) != value:
            return False
    for requirement in selector.match_expressions or ():
        present, values = requirement.key in labels, requirement.values or []
        match requirement.operator:
            case "In":
                ok = present and labels[requirement.key] in values
            case "NotIn":
                ok = not present or labels[requirement.key] not in values
            case "Exists":
                ok = present
            case _:
                ok = not present
        if not ok:
            return False
    return True


def pool_selects(pool: ResourcePool, labels: Mapping[str, str]) -> bool:
    """Whether `pool` admits workloads of a namespace with `labels` (unset or `{}`: any)."""
    selector = pool.spec.namespace_selector
    if selector is None or not (selector.match_labels or selector.match_expressions):
        return True
    return selects(selector, labels)


def _quotas(quotas: list[FlavorQuotas] | None) -> list[dict[str, Any]]:
    return [
        {"flavor": fq.flavor, "resources": {q.name: _quota(q) for q in fq.resources}}
        for fq in quotas or ()
    ]


def _quota(quota: ResourceQuota) -> dict[str, Any]:
    out: dict[str, Any] = {"nominal": quota.nominal}
    if quota.borrowing_limit is not None:
        out["borrowingLimit"] = quota.borrowing_limit
    if quota.lending_limit is not None:
        out["lendingLimit"] = quota.lending_limit
    return out


def pool_document(
    pool: ResourcePool, namespaces: Mapping[str, Mapping[str, str]]
) -> dict[str, Any]:
    """`pool` as a scenario's pool; its namespaceSelector becomes the list of those of
    `namespaces` (name -> labels, see `namespace_labels`) it selects."""
    spec = pool.spec
    out: dict[str, Any] = {
        "name": pool.metadata["name"],
        "queueingStrategy": spec.queueing_strategy.value,
        "preemption": msgspec.to_builtins(spec.preemption),
        "quotas": _quotas(spec.quotas),
    }
    if spec.cohort is not None:
        out["cohort"] = spec.cohort
    selector = spec.namespace_selector
    if selector is not None and (selector.match_labels or selector.match_expressions):
        out["namespaces"] = [ns for ns, labels in namespaces.items() if pool_selects(pool, labels)]
    return out


def cohort_document(cohort: Cohort) -> dict[str, Any]:
    """`cohort` as a scenario's cohort."""
    out: dict[str, Any] = {"name": cohort.metadata["name"], "quotas": _quotas(cohort.spec.quotas)}
    if cohort.spec.parent is not None:
        out["parent"] = cohort.spec.parent
    return out
