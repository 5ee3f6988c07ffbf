"""Pools, cohorts and workloads, and the scenario format that carries them.

The vocabulary is Kueue's, renamed for asya: a *pool* is a ClusterQueue, a *cohort* a Cohort
(which may nest and own quota), a *workload* an actor's replicas or a gang instance of an
actor group, made of pod sets. Field names are camelCase on the wire (`borrowingLimit`,
`podSets`), snake_case in Python. Quantities are `Milli` integers (see `quantity`).
`load_scenario` validates a decoded scenario and says what to fix.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, TypeAlias

import msgspec

from asya import typeinfo
from asya.admission.quantity import Milli, parse_quantity
from asya.errors import AdmissionError

FlavorResource: TypeAlias = tuple[str, str]
"""(flavor, resource), e.g. ("h100", "nvidia.com/gpu")."""


class QueueingStrategy(enum.StrEnum):
    STRICT_FIFO = "StrictFIFO"
    """The head blocks the pool until it is admitted."""
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    """A head that does not fit steps aside until quota is released."""


class WithinPool(enum.StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class ReclaimWithinCohort(enum.StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class BorrowPolicy(enum.StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class _Wire(
    msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True, gc=False
):
    # gc=False: scenario values are immutable trees that never form reference cycles, so the
    # garbage collector need not scan them (it matters with tens of thousands of workloads).
    pass


class BorrowWithinCohort(_Wire, frozen=True, kw_only=True):
    policy: BorrowPolicy = BorrowPolicy.NEVER
    max_priority_threshold: int | None = None
    """Only workloads at or below this priority may be preempted while borrowing."""


class Preemption(_Wire, frozen=True, kw_only=True):
    within_pool: WithinPool = WithinPool.NEVER
    reclaim_within_cohort: ReclaimWithinCohort = ReclaimWithinCohort.NEVER
    borrow_within_cohort: BorrowWithinCohort = BorrowWithinCohort()


class ResourceQuota(_Wire, frozen=True, kw_only=True):
    nominal: Milli
    borrowing_limit: Milli | None = None
    """Most this node may take from its cohort beyond its own quota; None = no limit."""
    lending_limit: Milli | None = None
    """Most of its quota this node lends to its cohort; None = all of it."""


class FlavorQuotas(_Wire, frozen=True, kw_only=True):
    flavor: str
    resources: dict[str, ResourceQuota]


class Cohort(_Wire, frozen=True, kw_only=True):
    name: str
    parent: str | None = None
    quotas: tuple[FlavorQuotas, ...] = ()


class Pool(_Wire, frozen=True, kw_only=True):
    name: str
    cohort: str | None = None
    namespaces: tuple[str, ...] | None = None
    """Namespaces whose workloads may use this pool; None = any."""
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    preemption: Preemption = Preemption()
    quotas: tuple[FlavorQuotas, ...] = ()
    """In order: the order flavors are tried in."""


class PodSet(_Wire, frozen=True, kw_only=True):
    name: str
    count: int
    min_count: int | None = None
    """Admit with any count from this to `count` (largest that fits); None = all or nothing."""
    requests: dict[str, Milli] = {}
    """Per pod."""
    flavors: tuple[str, ...] | None = None
    """Only these of the pool's flavors, tried in the pool's order; None = any. All pods of an
    actor's Deployment share one node selector, so they must land in one flavor."""


class PodSetAssignment(_Wire, frozen=True, kw_only=True):
    pod_set: str
    flavor: str
    count: int


class Workload(_Wire, frozen=True, kw_only=True):
    name: str
    pool: str
    namespace: str | None = None
    priority: int = 0
    created: int = 0
    """Creation order; smaller is older."""
    pod_sets: tuple[PodSet, ...]
    admitted: tuple[PodSetAssignment, ...] | None = None
    """Present only when the workload already holds quota."""


class Scenario(_Wire, frozen=True, kw_only=True):
    cohorts: tuple[Cohort, ...] = ()
    pools: tuple[Pool, ...] = ()
    workloads: tuple[Workload, ...] = ()


def _decode_quantity(kind: type, value: Any) -> Any:
    if kind is Milli:
        try:
            return parse_quantity(value)
        except AdmissionError as exc:
            raise ValueError(str(exc)) from exc
    raise NotImplementedError(f"no decoder for {kind}")


def load_scenario(raw: Mapping[str, Any]) -> Scenario:
    """A validated Scenario from decoded YAML or JSON.

    Raises:
        AdmissionError: a field has the wrong type or value, a name repeats, a reference
            (cohort parent, admitted pod set or flavor) points nowhere, or cohorts form a loop.
    """
    try:
        scenario = typeinfo.convert(raw, Scenario, dec_hook=_decode_quantity)
    except msgspec.ValidationError as exc:
        raise AdmissionError(f"invalid scenario: {exc}") from exc
    _check(scenario)
    return scenario


def _check(scenario: Scenario) -> None:
    for kind, names in (
        ("cohort", [c.name for c in scenario.cohorts]),
        ("pool", [p.name for p in scenario.pools]),
        ("workload", [w.name for w in scenario.workloads]),
    ):
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise AdmissionError(f"{kind} '{name}' is defined twice")
            seen.add(name)
    parents = {c.name: c.parent for c in scenario.cohorts}
    for start in parents:
        path, node = [start], parents[start]
        while node is not None:
            if node in path:
                raise AdmissionError(f"cohorts form a loop: {' -> '.join([*path, node])}")
            path.append(node)
            node = parents.get(node)
    pools = {p.name: p for p in scenario.pools}
    for wl in scenario.workloads:
        for ps in wl.pod_sets:
            if ps.count < 0 or (ps.min_count is not None and not 0 <= ps.min_count <= ps.count):
                raise AdmissionError(
                    f"workload '{wl.name}' pod set '{ps.name}': need 0 <= minCount <= count,"
                    f" got count {ps.count}, minCount {ps.min_count}"
                )
            if ps.flavors == ():
                raise AdmissionError(
                    f"workload '{wl.name}' pod set '{ps.name}': flavors is empty; name at least"
                    " one flavor, or leave it out for any"
                )
        if wl.admitted is not None:
            _check_admitted(wl, pools.get(wl.pool))


def _check_admitted(wl: Workload, pool: Pool | None) -> None:
    if pool is None:
        raise AdmissionError(
            f"workload '{wl.name}' is admitted to pool '{wl.pool}', which is not defined"
        )
    flavors = {q.flavor for q in pool.quotas}
    sets = {ps.name: ps for ps in wl.pod_sets}
    for given in wl.admitted or ():
        pod_set = sets.get(given.pod_set)
        if pod_set is None:
            raise AdmissionError(
                f"workload '{wl.name}' is admitted with an unknown pod set '{given.pod_set}'"
            )
        if given.flavor not in flavors:
            raise AdmissionError(
                f"workload '{wl.name}' is admitted to flavor '{given.flavor}', which pool"
                f" '{pool.name}' does not have (it has: {', '.join(sorted(flavors))})"
            )
        if pod_set.flavors is not None and given.flavor not in pod_set.flavors:
            raise AdmissionError(
                f"workload '{wl.name}' pod set '{given.pod_set}' is admitted to flavor"
                f" '{given.flavor}', outside the flavors it may use ({', '.join(pod_set.flavors)})"
            )
        if not 0 <= given.count <= pod_set.count:
            raise AdmissionError(
                f"workload '{wl.name}' pod set '{given.pod_set}' is admitted with count"
                f" {given.count}, outside 0..{pod_set.count}"
            )
