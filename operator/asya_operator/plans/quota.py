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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from asya.admission import model
from asya.admission.quantity import Milli, parse_quantity
from asya.admission.tree import Node, QuotaTree
from asya.errors import AdmissionError
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


Member = tuple[str, str]
"""A member of a cohort: ("pool", its name) or ("cohort", its name)."""


@dataclass(frozen=True)
class Lending:
    """Who lends what through the cohort tree, given what each pool's admitted workloads use,
    by the engine's arithmetic (`asya.admission.tree`: a lending limit keeps the rest of a
    member's quota for its own subtree).

    Per member (a pool, or a cohort with its whole subtree), by flavor and resource:
    - `nominal`: a pool's nominal quota; a cohort's own with every member's below it;
    - `used`: a pool's usage; the total of the pools below a cohort;
    - `borrowed`: what it takes from its cohort above what it has there (its quota less what
      a lending limit keeps out of the cohort's reach); for a root cohort, what its subtree
      uses above its quota (only after quota shrank under running work);
    - `lent`: the part of what it has in its cohort, unused, that other members of the cohort
      take. What they take is counted first against the quota the Cohort object owns, then
      against its members' unused quota in the cohort's order: its pools in the order given,
      then its cohorts by name (the engine does not say whose unused quota a borrower uses).
      A root cohort lends nothing: it has no cohort.
    """

    nominal: dict[Member, Usage]
    used: dict[Member, Usage]
    borrowed: dict[Member, Usage]
    lent: dict[Member, Usage]
    cohorts_read: bool
    """False: the Cohort objects could not be read, and were left out (see `lending`)."""


def lending(
    pools: Sequence[ResourcePool],
    usage: Mapping[str, Mapping[tuple[str, str], int]],
    cohorts: Sequence[Cohort] = (),
) -> Lending:
    """See `Lending`. `usage`: each pool's (by name). `cohorts`: the Cohort objects (a cohort
    that pools name needs none). While the Cohorts cannot be read (a loop in their parents, a
    quota that is not one) every Cohort object is left out: the pools lend within the cohorts
    they name, as if none existed. A pool whose quotas cannot be read is left out too: it lends and
    borrows nothing (its Active condition says why)."""
    cohorts_read = True
    try:
        model.build_scenario(cohorts=[cohort_of(c) for c in cohorts])
    except AdmissionError:
        cohorts, cohorts_read = (), False
    readable = [pool_of(p, {}) for p in pools]
    readable = [p for p in readable if _readable(p)]
    tree = QuotaTree([cohort_of(c) for c in cohorts], readable)
    nodes: dict[Member, Node] = {("pool", name): node for name, node in tree.pools.items()}
    nodes.update({("cohort", name): node for name, node in tree.cohorts.items()})
    for name, node in tree.pools.items():
        tree.add_usage(node, usage.get(name, {}))
    members = {node: member for member, node in nodes.items()}
    found = Lending(
        nominal={}, used={}, borrowed={}, lent={m: {} for m in nodes}, cohorts_read=cohorts_read
    )
    for member, node in nodes.items():
        below = tree.subtree_pools(node)
        found.nominal[member] = _total(
            {key: quota.nominal for key, quota in n.quotas.items()} for n in _subtree(node)
        )
        found.used[member] = _total(usage.get(n.name, {}) for n in below)
        found.borrowed[member] = {
            key: excess
            for key in node.subtree.keys() | node.usage.keys()
            if (excess := _in_parent(node, key) - _stored_in_parent(node, key)) > 0
        }
    for parent in tree.cohorts.values():
        inside = sorted(parent.children, key=lambda n: (not n.is_pool, "" if n.is_pool else n.name))
        wanted: Usage = {}
        for child in inside:
            for key, value in found.borrowed[members[child]].items():
                wanted[key] = wanted.get(key, 0) + value
        for key, quota in parent.quotas.items():
            wanted[key] = max(0, wanted.get(key, 0) - quota.nominal)
        for child in inside:
            for key in child.subtree:
                spare = _stored_in_parent(child, key) - _in_parent(child, key)
                lends = min(max(0, spare), wanted.get(key, 0))
                if lends:
                    found.lent[members[child]][key] = lends
                    wanted[key] -= lends
    return found


def _readable(pool: model.Pool) -> bool:
    try:
        model.build_scenario(pools=[pool])
    except AdmissionError:
        return False
    return True


def _subtree(node: Node) -> list[Node]:
    found, stack = [], [node]
    while stack:
        top = stack.pop()
        found.append(top)
        stack.extend(top.children)
    return found


def _total(parts: Iterable[Mapping[tuple[str, str], int]]) -> Usage:
    total: Usage = {}
    for part in parts:
        for key, value in part.items():
            total[key] = total.get(key, 0) + value
    return total


def _stored_in_parent(node: Node, key: tuple[str, str]) -> int:
    """What `node` has in its cohort: its quota less what a lending limit keeps for it (a root
    cohort: all of its quota)."""
    local = 0 if node.parent is None else node.local_quota(key)
    return node.subtree.get(key, 0) - local


def _in_parent(node: Node, key: tuple[str, str]) -> int:
    """What `node`'s usage takes from its cohort (a root cohort: all of its usage)."""
    local = 0 if node.parent is None else node.local_quota(key)
    return max(0, node.usage.get(key, 0) - local)


def lent(
    pools: Sequence[ResourcePool],
    usage: Mapping[str, Mapping[tuple[str, str], int]],
    cohorts: Sequence[Cohort] = (),
) -> dict[str, Usage]:
    """Each pool's (by name) unused nominal quota that other members of its cohort use
    (`Lending.lent`)."""
    found = lending(pools, usage, cohorts)
    return {
        str(p.metadata["name"]): found.lent.get(("pool", p.metadata["name"]), {}) for p in pools
    }
