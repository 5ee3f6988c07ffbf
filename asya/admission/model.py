"""Pools, cohorts and workloads, and the scenario format that carries them.

The vocabulary is Kueue's, renamed for asya: a *pool* is a ClusterQueue, a *cohort* a Cohort
(which may nest and own quota), a *workload* an actor's replicas or a gang instance of an
actor group, made of pod sets. Field names are camelCase on the wire (`borrowingLimit`,
`podSets`), snake_case in Python.

A pool's and a cohort's quotas and a pool's preemption are the quota vocabulary of `quotas`,
the very types the operator's ResourcePool and Cohort decode into, so quotas are written as
the CRs write them (`8`, `"500m"`, `"64Gi"`); pod set requests are `Milli` integers (see
`quantity`).

Two ways in, one set of checks (`check_scenario`): `load_scenario` reads a decoded scenario
file (`asya admission simulate`), `build_scenario` takes typed parts (the operator's snapshot
of the cluster).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any, Final, TypeAlias

import msgspec

from asya import typeinfo
from asya.admission.quantity import Milli, format_quantity, parse_quantity
from asya.admission.quotas import FlavorQuotas, Preemption, Wire, quota_milli
from asya.errors import AdmissionError

FlavorResource: TypeAlias = tuple[str, str]
"""(flavor, resource), e.g. ("h100", "nvidia.com/gpu")."""


class QueueingStrategy(enum.StrEnum):
    STRICT_FIFO = "StrictFIFO"
    """The head blocks the pool until it is admitted."""
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    """A head that does not fit steps aside until quota is released."""


class Cohort(Wire, frozen=True, kw_only=True):
    name: str
    parent: str | None = None
    quotas: tuple[FlavorQuotas, ...] = ()


class Pool(Wire, frozen=True, kw_only=True):
    name: str
    cohort: str | None = None
    namespaces: tuple[str, ...] | None = None
    """Namespaces whose workloads may use this pool; None = any."""
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    preemption: Preemption = msgspec.field(default_factory=Preemption)
    quotas: tuple[FlavorQuotas, ...] = ()
    """In order: the order flavors are tried in."""


class PodSet(Wire, frozen=True, kw_only=True):
    name: str
    count: int
    min_count: int | None = None
    """Admit with any count from this to `count` (largest that fits); None = all or nothing."""
    requests: dict[str, Milli] = {}
    """Per pod."""
    flavors: tuple[str, ...] | None = None
    """Only these of the pool's flavors, tried in the pool's order; None = any. All pods of an
    actor's Deployment share one node selector, so they must land in one flavor."""


class PodSetAssignment(Wire, frozen=True, kw_only=True):
    pod_set: str
    flavor: str
    count: int


class Workload(Wire, frozen=True, kw_only=True):
    name: str
    pool: str
    namespace: str | None = None
    priority: int = 0
    created: int = 0
    """Creation order; smaller is older."""
    pod_sets: tuple[PodSet, ...]
    admitted: tuple[PodSetAssignment, ...] | None = None
    """Present only when the workload already holds quota."""


class Scenario(Wire, frozen=True, kw_only=True):
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
    """A validated Scenario from a decoded scenario file (YAML or JSON).

    A file spells a flavor's resources as a map by resource name (`cpu: {nominal: 4}`); the
    model, like a CR, holds them as a list of quotas with names.

    Raises:
        AdmissionError: a field has the wrong type or value, a name repeats, a reference
            (cohort parent, admitted pod set or flavor) points nowhere, or cohorts form a loop.
    """
    listed = {**raw} | {
        kind: [_with_listed_resources(node, kind.removesuffix("s")) for node in raw[kind]]
        for kind in ("cohorts", "pools")
        if isinstance(raw.get(kind), list)
    }
    try:
        scenario = typeinfo.convert(listed, Scenario, dec_hook=_decode_quantity)
    except msgspec.ValidationError as exc:
        raise AdmissionError(f"invalid scenario: {exc}") from exc
    check_scenario(scenario)
    return scenario


def _with_listed_resources(node: Any, kind: str) -> Any:
    if not isinstance(node, Mapping) or not isinstance(node.get("quotas"), list):
        return node  # the decode says what is wrong with it
    quotas = []
    for flavor in node["quotas"]:
        resources = flavor.get("resources") if isinstance(flavor, Mapping) else None
        if resources is not None:
            where = f"{kind} '{node.get('name')}' flavor '{flavor.get('flavor')}'"
            if not isinstance(resources, Mapping):
                raise AdmissionError(
                    f"{where}: give resources as a map by resource name, such as"
                    " {cpu: {nominal: 4}}"
                )
            listed = [_named(f"{where} resource '{r}'", r, q) for r, q in resources.items()]
            flavor = {**flavor, "resources": listed}
        quotas.append(flavor)
    return {**node, "quotas": quotas}


_QUOTA_FIELDS: Final = ("nominal", "borrowingLimit", "lendingLimit")


def _named(where: str, resource: str, quota: Any) -> Any:
    """A file's `resource: quota` as the model's quota with a name. Its quantities are read here,
    so a bad one is named in words; a fraction written as a number (`0.5`) is kept as the
    quantity it is (`500m`), since a quota, as in a CR, is an integer or a string."""
    if not isinstance(quota, Mapping):
        return quota  # the decode says what is wrong with it
    named = {"name": resource, **quota}
    for key in _QUOTA_FIELDS:
        value = quota.get(key)
        if isinstance(value, str | int | float):
            try:
                milli = parse_quantity(value)
            except AdmissionError as exc:
                raise AdmissionError(f"{where} {key}: {exc}") from exc
            if isinstance(value, float):
                named[key] = format_quantity(milli)
    return named


def build_scenario(
    *,
    cohorts: Iterable[Cohort] = (),
    pools: Iterable[Pool] = (),
    workloads: Iterable[Workload] = (),
) -> Scenario:
    """A validated Scenario from typed parts: the same checks `load_scenario` makes.

    Raises:
        AdmissionError: as `check_scenario`.
    """
    scenario = Scenario(cohorts=tuple(cohorts), pools=tuple(pools), workloads=tuple(workloads))
    check_scenario(scenario)
    return scenario


def check_scenario(scenario: Scenario) -> None:
    """Check what a typed scenario's types cannot say: names, references, quotas.

    Raises:
        AdmissionError: a name repeats, a reference (cohort parent, admitted pod set or
            flavor) points nowhere, cohorts form a loop, a quota is not a quantity the engine
            reads or names a resource twice, or a pod set's counts are out of bounds.
    """
    _check_names(scenario)
    for kind, nodes in (("cohort", scenario.cohorts), ("pool", scenario.pools)):
        for node in nodes:
            _check_quotas(f"{kind} '{node.name}'", node.quotas)
    _check_workloads(scenario)


def _check_quotas(owner: str, quotas: Iterable[FlavorQuotas]) -> None:
    for flavor in quotas:
        seen: set[str] = set()
        for quota in flavor.resources:
            where = f"{owner} flavor '{flavor.flavor}' resource '{quota.name}'"
            if quota.name in seen:
                raise AdmissionError(f"{where} is given twice: give each resource once")
            seen.add(quota.name)
            try:
                quota_milli(quota)
            except AdmissionError as exc:
                raise AdmissionError(f"{where}: {exc}") from exc


def _check_names(scenario: Scenario) -> None:
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


def _check_workloads(scenario: Scenario) -> None:
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
