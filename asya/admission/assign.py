"""Flavor assignment: can this workload be admitted in its pool now, and with which flavors?

Each pod set gets one flavor, tried in the pool's order, among those its `flavors` names if it
names any, those without accelerators first for a pod set that asks for none (`accelerators`)
(Kueue's flavorassigner, with its default fungibility: stop at the first flavor that fits,
borrowing or not; if none fits, the first where preemption could make room). Per flavor
and resource the mode is:
- FIT: the request fits what is available now;
- PREEMPT: it would fit if workloads were evicted — only if it fits the pool's *nominal*
  quota (a workload may preempt only within what is its own), or the pool may preempt while
  borrowing (`borrowWithinCohort`);
- NO_FIT: otherwise.
A workload's mode is the worst of its pod sets'. A pod set with `minCount` may be admitted
with a smaller count: the largest that FITs, found by bisection over the reduction as in
Kueue's partial admission. Pure: reads the tree, changes nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

from asya.admission import accelerators
from asya.admission.model import FlavorResource, PodSet, Pool, Workload
from asya.admission.quantity import format_quantity
from asya.admission.quotas import BorrowPolicy, FlavorQuotas
from asya.admission.tree import Node, QuotaTree


class Mode(enum.IntEnum):
    NO_FIT = 0
    PREEMPT = 1
    FIT = 2


_Shortfall: TypeAlias = tuple[FlavorResource, int]
"""(flavor and resource, total request) that did not fit: explained only if it matters."""


@dataclass(frozen=True, slots=True)
class PodSetChoice:
    pod_set: str
    flavor: str
    count: int
    mode: Mode


@dataclass(frozen=True, slots=True)
class Assignment:
    """The outcome of trying one workload against its pool."""

    mode: Mode
    choices: tuple[PodSetChoice, ...] = ()
    borrowing_level: int = 0
    """0: within the pool's nominal quota; else how far up the cohort tree it borrows (the
    highest of its flavors and resources; see `QuotaTree.borrowing_level`)."""
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    """Total request per (flavor, resource) of the chosen counts."""
    needs_preemption: frozenset[FlavorResource] = frozenset()
    """Where the request exceeds what is available now."""
    reason: str = ""
    """Why it does not fit, when that is known without the tree (no flavor covers it)."""
    shortfall: _Shortfall | None = None
    """The first (flavor and resource, request) that did not fit: `explain` words it."""

    @property
    def borrowing(self) -> bool:
        return self.borrowing_level > 0


def workload_usage(
    workload: Workload, counts: Mapping[str, int], flavors: Mapping[str, str]
) -> dict[FlavorResource, int]:
    """Total request of `workload` at the given pod-set counts and flavors."""
    usage: dict[FlavorResource, int] = {}
    for pod_set in workload.pod_sets:
        count = counts.get(pod_set.name, 0)
        for resource, per_pod in pod_set.requests.items():
            fr = (flavors[pod_set.name], resource)
            usage[fr] = usage.get(fr, 0) + per_pod * count
    return usage


def assign(workload: Workload, pool: Pool, tree: QuotaTree) -> Assignment:
    """The best assignment for `workload` in `pool` now: full counts, else reduced ones."""
    node = tree.pools[pool.name]
    full = {ps.name: ps.count for ps in workload.pod_sets}
    best = _assign_counts(workload, pool, node, tree, full)
    if best.mode is Mode.FIT or not any(ps.min_count is not None for ps in workload.pod_sets):
        return best
    reduced = _largest_fitting_reduction(workload, pool, node, tree)
    return reduced if reduced is not None else best


def _largest_fitting_reduction(
    workload: Workload, pool: Pool, node: Node, tree: QuotaTree
) -> Assignment | None:
    deltas = {
        ps.name: ps.count - (ps.count if ps.min_count is None else ps.min_count)
        for ps in workload.pod_sets
    }
    total = sum(deltas.values())
    if total == 0:
        return None

    def counts_at(step: int) -> dict[str, int]:
        return {ps.name: ps.count - deltas[ps.name] * step // total for ps in workload.pod_sets}

    low, high, found = 1, total, None
    while low <= high:  # smallest reduction that fits = largest counts
        middle = (low + high) // 2
        attempt = _assign_counts(workload, pool, node, tree, counts_at(middle))
        if attempt.mode is Mode.FIT:
            found, high = attempt, middle - 1
        else:
            low = middle + 1
    return found


def _assign_counts(
    workload: Workload, pool: Pool, node: Node, tree: QuotaTree, counts: Mapping[str, int]
) -> Assignment:
    taken: dict[FlavorResource, int] = {}
    choices: list[PodSetChoice] = []
    needs: set[FlavorResource] = set()
    borrowing_level = 0
    first_shortfall: _Shortfall | None = None
    for pod_set in workload.pod_sets:
        outcome = _choose_flavor(pod_set, counts[pod_set.name], pool, node, tree, taken)
        if isinstance(outcome, str):
            return Assignment(Mode.NO_FIT, reason=f"pod set '{pod_set.name}': {outcome}")
        choice, pod_level, pod_needs, shortfall = outcome
        first_shortfall = first_shortfall or shortfall
        if choice.mode is Mode.NO_FIT:
            return Assignment(Mode.NO_FIT, shortfall=shortfall)
        choices.append(choice)
        borrowing_level = max(borrowing_level, pod_level)
        needs |= pod_needs
        for resource, per_pod in pod_set.requests.items():
            fr = (choice.flavor, resource)
            taken[fr] = taken.get(fr, 0) + per_pod * choice.count
    mode = min((c.mode for c in choices), default=Mode.FIT)
    shortfall = None if mode is Mode.FIT else first_shortfall
    return Assignment(
        mode, tuple(choices), borrowing_level, taken, frozenset(needs), shortfall=shortfall
    )


def _choose_flavor(
    pod_set: PodSet,
    count: int,
    pool: Pool,
    node: Node,
    tree: QuotaTree,
    taken: Mapping[FlavorResource, int],
) -> tuple[PodSetChoice, int, set[FlavorResource], _Shortfall | None] | str:
    """(choice, borrowing level, resources needing preemption, first shortfall) or why no
    flavor can serve the pod set at all."""
    fallback: tuple[PodSetChoice, int, set[FlavorResource], _Shortfall | None] | None = None
    first_shortfall: _Shortfall | None = None
    missing_notes: list[str] = []
    candidates = accelerators.in_preferred_order(
        pod_set.requests,
        _allowed_flavors(pod_set, pool),
        lambda fr: tree.potential_available(node, fr),
    )
    for flavor_quotas in candidates:
        flavor = flavor_quotas.flavor
        missing = [r for r in pod_set.requests if flavor_quotas.quota(r) is None]
        if missing:
            missing_notes.append(f"flavor {flavor} has no quota for {', '.join(missing)}")
            continue
        mode, level, needs = Mode.FIT, 0, set()
        shortfall: _Shortfall | None = None
        for resource, per_pod in pod_set.requests.items():
            fr = (flavor, resource)
            value = taken.get(fr, 0) + per_pod * count
            fr_mode = _resource_mode(fr, value, pool, node, tree)
            # Borrowing is about where usage ends up, whether it fits now or after preemption;
            # the level is measured against usage as it stands (Kueue measures a preemptor's
            # after the evictions it simulates).
            level = max(level, tree.borrowing_level(node, fr, value))
            if fr_mode is not Mode.FIT:
                needs.add(fr)
                shortfall = shortfall or (fr, value)
            mode = min(mode, fr_mode)
        choice = (PodSetChoice(pod_set.name, flavor, count, mode), level, needs, shortfall)
        if mode is Mode.FIT:
            return choice
        if mode is Mode.PREEMPT and fallback is None:
            fallback = choice
        first_shortfall = first_shortfall or shortfall
    if fallback is not None:
        return fallback
    if first_shortfall is None:
        if not pool.quotas:
            return f"pool {pool.name} has no quota"
        if not candidates:
            return (
                f"may use only flavor {', '.join(pod_set.flavors or ())}, which pool {pool.name}"
                f" does not have (it has: {', '.join(q.flavor for q in pool.quotas)})"
            )
        wanted = ", ".join(sorted(pod_set.requests))
        return f"no flavor of pool {pool.name} covers {wanted} ({'; '.join(missing_notes)})"
    flavor = first_shortfall[0][0]
    return PodSetChoice(pod_set.name, flavor, count, Mode.NO_FIT), 0, set(), first_shortfall


def _allowed_flavors(pod_set: PodSet, pool: Pool) -> tuple[FlavorQuotas, ...]:
    """The pool's flavors the pod set may use, in the pool's order."""
    if pod_set.flavors is None:
        return pool.quotas
    return tuple(q for q in pool.quotas if q.flavor in pod_set.flavors)


def _resource_mode(fr: FlavorResource, value: int, pool: Pool, node: Node, tree: QuotaTree) -> Mode:
    if value <= tree.available(node, fr):
        return Mode.FIT
    if value > tree.potential_available(node, fr):
        return Mode.NO_FIT
    # A workload may preempt only within its pool's nominal quota, unless the pool may
    # preempt while borrowing (Kueue's flavorassigner).
    if value <= node.nominal(fr) or _may_preempt_while_borrowing(pool):
        return Mode.PREEMPT
    return Mode.NO_FIT


def explain(assignment: Assignment, pool: Pool, tree: QuotaTree) -> str:
    """Why `assignment` is not a fit in `pool` as things stand, in words a person can act on."""
    if assignment.shortfall is None:
        return assignment.reason
    fr, value = assignment.shortfall
    flavor, resource = fr
    node = tree.pools[pool.name]
    potential = tree.potential_available(node, fr)
    if value > potential:
        return (
            f"insufficient quota for {resource} in flavor {flavor}: needs {format_quantity(value)},"
            f" more than pool {pool.name} can ever have ({format_quantity(max(0, potential))})"
        )
    return _shortfall(fr, value, tree.available(node, fr), pool, node)


def _shortfall(fr: FlavorResource, value: int, available: int, pool: Pool, node: Node) -> str:
    flavor, resource = fr
    unused = max(0, node.nominal(fr) - node.usage.get(fr, 0))
    borrowable = max(0, available - unused)
    text = (
        f"insufficient quota for {resource} in flavor {flavor}: needs {format_quantity(value)},"
        f" pool {pool.name} has {format_quantity(unused)} unused"
    )
    if node.parent is not None:
        text += f" and may borrow {format_quantity(borrowable)} more from cohort {node.parent.name}"
    return text + f" ({format_quantity(value - max(0, available))} more needed)"


def _may_preempt_while_borrowing(pool: Pool) -> bool:
    return pool.preemption.borrow_within_cohort.policy is not BorrowPolicy.NEVER
