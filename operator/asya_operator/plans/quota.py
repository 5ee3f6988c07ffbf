"""Pools, cohorts, namespaces and requests as the admission engine has them.

Pure: typed CRs in, the engine's typed values out (`asya.admission.model`'s Pool and Cohort,
requests in milli-units). A ResourcePool's quotas and preemption are the engine's own types
already, so they are handed over as decoded; only what is the API's own is translated (the
name from metadata, the namespaceSelector as the namespaces it selects). Shared by the
cluster's admission pass (`admission`) and the offline what-if (`whatif`), so both describe
quota the same way; and what a pool lends its cohort (`lent`), which the pools' status and the
waiting actors' messages both tell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from asya.admission import model
from asya.admission.quantity import Milli, parse_quantity
from asya_operator.api.pool import Cohort, NamespaceSelector, ResourcePool
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


def requests_of(resources: ActorResources) -> dict[str, Milli]:
    """What one replica with `resources` requests, in milli-units, by resource name.

    Raises:
        AdmissionError: its cpu or memory is not a quantity the engine reads.
    """
    requests: dict[str, Milli] = {}
    if resources.cpu is not None:
        requests["cpu"] = parse_quantity(resources.cpu)
    if resources.memory is not None:
        requests["memory"] = parse_quantity(resources.memory)
    if resources.gpus:
        requests[GPU_RESOURCE] = parse_quantity(resources.gpus)
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


def pool_of(pool: ResourcePool, namespaces: Mapping[str, Mapping[str, str]]) -> model.Pool:
    """`pool` as the engine's pool; its namespaceSelector becomes the list of those of
    `namespaces` (name -> labels, see `namespace_labels`) it selects."""
    spec = pool.spec
    selector = spec.namespace_selector
    selected = None
    if selector is not None and (selector.match_labels or selector.match_expressions):
        selected = tuple(ns for ns, labels in namespaces.items() if pool_selects(pool, labels))
    return model.Pool(
        name=pool.metadata["name"],
        cohort=spec.cohort,
        namespaces=selected,
        queueing_strategy=spec.queueing_strategy,
        preemption=spec.preemption,
        quotas=tuple(spec.quotas or ()),
    )


def cohort_of(cohort: Cohort) -> model.Cohort:
    """`cohort` as the engine's cohort."""
    return model.Cohort(
        name=cohort.metadata["name"],
        parent=cohort.spec.parent,
        quotas=tuple(cohort.spec.quotas or ()),
    )


Usage = dict[tuple[str, str], int]
"""(flavor, resource) -> milli-units."""


def nominal(pool: ResourcePool) -> Usage:
    """The pool's nominal quota per flavor and resource."""
    return {
        (flavor.flavor, quota.name): parse_quantity(quota.nominal)
        for flavor in pool.spec.quotas or ()
        for quota in flavor.resources
    }


def lent(
    pools: Sequence[ResourcePool], usage: Mapping[str, Mapping[tuple[str, str], int]]
) -> dict[str, Usage]:
    """Each pool's (by name) unused nominal quota that pools of its cohort use, given what each
    pool's admitted workloads use (`usage`): what those pools use above their nominal quota,
    counted against the lenders in the cohort's pool order (the engine does not say whose
    unused quota a borrower uses)."""
    given: dict[str, Usage] = {str(p.metadata["name"]): {} for p in pools}
    cohorts: dict[str, list[ResourcePool]] = {}
    for pool in pools:
        if pool.spec.cohort is not None:
            cohorts.setdefault(pool.spec.cohort, []).append(pool)
    for members in cohorts.values():
        wanted: Usage = {}
        for pool in members:
            own, used = nominal(pool), usage.get(str(pool.metadata["name"]), {})
            for key, value in used.items():
                wanted[key] = wanted.get(key, 0) + max(0, value - own.get(key, 0))
        for pool in members:
            name = str(pool.metadata["name"])
            used = usage.get(name, {})
            for key, own_value in nominal(pool).items():
                lends = min(max(0, own_value - used.get(key, 0)), wanted.get(key, 0))
                if lends:
                    given[name][key] = lends
                    wanted[key] -= lends
    return given
