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
from dataclasses import dataclass
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


def nominal(node: ResourcePool | Cohort) -> Usage:
    """The nominal quota a pool, or a cohort itself (not its members), has per flavor and
    resource."""
    return {
        (flavor.flavor, quota.name): parse_quantity(quota.nominal)
        for flavor in node.spec.quotas or ()
        for quota in flavor.resources
    }


Member = tuple[str, str]
"""A member of a cohort: ("pool", its name) or ("cohort", its name)."""


@dataclass(frozen=True)
class Lending:
    """Who lends what through the cohort tree, given what each pool's admitted workloads use.

    Per member (a pool, or a cohort with its whole subtree), by flavor and resource:
    - `nominal`: a pool's nominal quota; a cohort's own with every member's below it;
    - `used`: a pool's usage; the total of the pools below a cohort;
    - `lent`: the part of its unused nominal quota that other members of its cohort use above
      their own. What they use above their own is taken first from the quota the cohort owns,
      then from its members' unused quota in the cohort's order: its pools in the order given,
      then its cohorts (the engine does not say whose unused quota a borrower uses). A root
      cohort lends nothing: it has no cohort.
    """

    nominal: dict[Member, Usage]
    used: dict[Member, Usage]
    lent: dict[Member, Usage]


def lending(
    pools: Sequence[ResourcePool],
    usage: Mapping[str, Mapping[tuple[str, str], int]],
    cohorts: Sequence[Cohort] = (),
) -> Lending:
    """See `Lending`. `usage`: each pool's (by name). `cohorts`: the Cohort objects (a cohort
    that pools name needs none; one in a loop of parents has no subtree and lends nothing)."""
    own = {str(c.metadata["name"]): nominal(c) for c in cohorts}
    members: dict[str, list[Member]] = {}
    for pool in pools:
        if pool.spec.cohort is not None:
            members.setdefault(pool.spec.cohort, []).append(("pool", str(pool.metadata["name"])))
    for cohort in cohorts:
        if cohort.spec.parent is not None:
            members.setdefault(cohort.spec.parent, []).append(("cohort", cohort.metadata["name"]))
    found = Lending(nominal={}, used={}, lent={})
    for pool in pools:
        name = str(pool.metadata["name"])
        found.nominal["pool", name] = nominal(pool)
        found.used["pool", name] = dict(usage.get(name, {}))

    def subtree(name: str, seen: frozenset[str]) -> None:
        found.nominal["cohort", name], found.used["cohort", name] = dict(own.get(name, {})), {}
        for kind, member in members.get(name, ()):
            if kind == "cohort":
                if member in seen:
                    continue  # a loop of parents: the operator reports it, admission stops
                subtree(member, seen | {member})
            for key, value in found.nominal[kind, member].items():
                found.nominal["cohort", name][key] = (
                    found.nominal["cohort", name].get(key, 0) + value
                )
            for key, value in found.used[kind, member].items():
                found.used["cohort", name][key] = found.used["cohort", name].get(key, 0) + value

    for name in {*members, *own}:
        if ("cohort", name) not in found.nominal:
            subtree(name, frozenset({name}))
    for member in found.nominal:
        found.lent[member] = {}
    for name, inside in members.items():
        wanted: Usage = {}
        for member in inside:
            used, quota = found.used[member], found.nominal[member]
            for key, value in used.items():
                wanted[key] = wanted.get(key, 0) + max(0, value - quota.get(key, 0))
        for key, value in own.get(name, {}).items():
            wanted[key] = max(0, wanted.get(key, 0) - value)
        for member in sorted(inside, key=lambda m: m[0] == "cohort"):  # pools first, in order
            used = found.used[member]
            for key, value in found.nominal[member].items():
                lends = min(max(0, value - used.get(key, 0)), wanted.get(key, 0))
                if lends:
                    found.lent[member][key] = lends
                    wanted[key] -= lends
    return found


def lent(
    pools: Sequence[ResourcePool],
    usage: Mapping[str, Mapping[tuple[str, str], int]],
    cohorts: Sequence[Cohort] = (),
) -> dict[str, Usage]:
    """Each pool's (by name) unused nominal quota that other members of its cohort use
    (`Lending.lent`)."""
    found = lending(pools, usage, cohorts)
    return {str(p.metadata["name"]): found.lent["pool", str(p.metadata["name"])] for p in pools}
