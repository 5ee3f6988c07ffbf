"""Which admitted workloads to evict so that a pending one fits (Kueue's classical preemption).

Candidates (`find_candidates`): in the preemptor's own pool, per `withinPool` — lower
priority, or also equal priority and newer; in other pools of the cohort tree, per
`reclaimWithinCohort`, only from pools that are borrowing what is needed — lower priority, or
any priority. Candidates are tried in order: other pools first (reclaiming borrowed quota
before touching the pool's own work), lower priority first, most recently admitted first.

`choose_targets` removes candidates one by one until the preemptor fits, then adds back, in
reverse, every one it can do without (so the set is minimal). Unless the pool may borrow while
preempting (`borrowWithinCohort`), the preemptor must fit without borrowing, i.e. within its
nominal quota. Choosing is separate from evicting: this module only decides.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from enum import StrEnum

from asya.admission.assign import Assignment
from asya.admission.model import FlavorResource, Pool
from asya.admission.quotas import BorrowPolicy, ReclaimWithinCohort, WithinPool
from asya.admission.tree import Node, QuotaTree


class PreemptionReason(StrEnum):
    IN_POOL = "InPool"
    IN_COHORT_RECLAMATION = "InCohortReclamation"
    IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"


@dataclass(frozen=True, slots=True)
class Admitted:
    """A workload holding quota, as preemption sees it."""

    name: str
    pool: str
    priority: int
    created: int
    sequence: int
    """Admission order: larger is more recent."""
    usage: dict[FlavorResource, int]


@dataclass(frozen=True, slots=True)
class Target:
    victim: Admitted
    reason: PreemptionReason


@dataclass(frozen=True, slots=True)
class Preemptor:
    name: str
    pool: Pool
    priority: int
    created: int
    assignment: Assignment


def find_candidates(
    preemptor: Preemptor, tree: QuotaTree, admitted_by_pool: dict[str, list[Admitted]]
) -> list[Admitted]:
    """Admitted workloads the policy allows `preemptor` to evict, using what it needs.

    Each list in `admitted_by_pool` is kept sorted by `admission_rank`.
    """
    policy = preemptor.pool.preemption
    needs = preemptor.assignment.needs_preemption
    node = tree.pools[preemptor.pool.name]
    found: list[Admitted] = []
    if policy.within_pool is not WithinPool.NEVER:
        equal_ok = policy.within_pool is WithinPool.LOWER_OR_NEWER_EQUAL_PRIORITY
        for candidate in _ranked_below(
            admitted_by_pool.get(node.name, []), preemptor.priority, include_equal=equal_ok
        ):
            if candidate.priority == preemptor.priority and not (
                preemptor.created < candidate.created
            ):
                continue
            if _uses_any(candidate, needs):
                found.append(candidate)
    if node.parent is not None and policy.reclaim_within_cohort is not ReclaimWithinCohort.NEVER:
        only_lower = policy.reclaim_within_cohort is ReclaimWithinCohort.LOWER_PRIORITY
        for other in tree.subtree_pools(node.root()):
            if other is node or not tree.is_borrowing(other, needs):
                continue  # no reclaiming from itself, nor from pools within their quota
            ranked = admitted_by_pool.get(other.name, [])
            if only_lower:
                ranked = _ranked_below(ranked, preemptor.priority, include_equal=False)
            found.extend(c for c in ranked if _uses_any(c, needs))
    own = node.name
    found.sort(key=lambda c: (c.pool == own, c.priority, -c.sequence, c.name))
    return found


def choose_targets(
    preemptor: Preemptor, tree: QuotaTree, admitted_by_pool: dict[str, list[Admitted]]
) -> list[Target]:
    """A minimal set of evictions after which `preemptor` fits; empty if there is none.

    Leaves the tree as it found it.
    """
    candidates = find_candidates(preemptor, tree, admitted_by_pool)
    node = tree.pools[preemptor.pool.name]
    if not candidates or not _could_fit(preemptor.assignment.usage, node, tree, candidates):
        return []
    own = [c for c in candidates if c.pool == node.name]
    if len(own) == len(candidates):
        return _minimal(preemptor, tree, candidates, allow_borrowing=True, threshold=None)
    policy = preemptor.pool.preemption.borrow_within_cohort
    if policy.policy is not BorrowPolicy.NEVER:
        threshold = preemptor.priority
        if policy.max_priority_threshold is not None and policy.max_priority_threshold < threshold:
            threshold = policy.max_priority_threshold + 1
        allowed = candidates
        if not _under_nominal(node, preemptor.assignment.needs_preemption):
            allowed = [c for c in candidates if c.pool == node.name or c.priority < threshold]
        targets = _minimal(preemptor, tree, allowed, allow_borrowing=True, threshold=threshold)
        if targets:
            return targets
    if _under_nominal(node, preemptor.assignment.needs_preemption):
        targets = _minimal(preemptor, tree, candidates, allow_borrowing=False, threshold=None)
        if targets:
            return targets
    return _minimal(preemptor, tree, own, allow_borrowing=True, threshold=None)


def _minimal(
    preemptor: Preemptor,
    tree: QuotaTree,
    candidates: list[Admitted],
    *,
    allow_borrowing: bool,
    threshold: int | None,
) -> list[Target]:
    node = tree.pools[preemptor.pool.name]
    request = preemptor.assignment.usage
    needs = preemptor.assignment.needs_preemption
    targets: list[Target] = []
    fits = False
    for candidate in candidates:
        victim_node = tree.pools[candidate.pool]
        reason = PreemptionReason.IN_POOL
        if victim_node is not node:
            if not tree.is_borrowing(victim_node, needs):
                continue
            reason = PreemptionReason.IN_COHORT_RECLAMATION
            if threshold is not None:
                if candidate.priority >= threshold:
                    # Evicting a workload at or above the threshold: the preemptor may not
                    # borrow (the candidates come lowest priority first, so this sticks).
                    allow_borrowing = False
                else:
                    reason = PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING
        tree.remove_usage(victim_node, candidate.usage)
        targets.append(Target(candidate, reason))
        if _fits(request, node, tree, allow_borrowing=allow_borrowing):
            fits = True
            break
    if not fits:
        _restore(tree, targets)
        return []
    kept = _fill_back(request, node, tree, targets, allow_borrowing=allow_borrowing)
    _restore(tree, kept)
    return kept


def _fill_back(
    request: dict[FlavorResource, int],
    node: Node,
    tree: QuotaTree,
    targets: list[Target],
    *,
    allow_borrowing: bool,
) -> list[Target]:
    """Give back, newest-removed first, every victim the preemptor can fit without."""
    kept = list(targets)
    for index in range(len(kept) - 2, -1, -1):
        victim = kept[index].victim
        victim_node = tree.pools[victim.pool]
        tree.add_usage(victim_node, victim.usage)
        if _fits(request, node, tree, allow_borrowing=allow_borrowing):
            del kept[index]
        else:
            tree.remove_usage(victim_node, victim.usage)
    return kept


def _restore(tree: QuotaTree, targets: list[Target]) -> None:
    for target in targets:
        tree.add_usage(tree.pools[target.victim.pool], target.victim.usage)


def _fits(
    request: dict[FlavorResource, int], node: Node, tree: QuotaTree, *, allow_borrowing: bool
) -> bool:
    for fr, value in request.items():
        if not allow_borrowing and tree.borrowing_with(node, fr, value):
            return False
        if value > tree.available(node, fr):
            return False
    return True


def _could_fit(
    request: dict[FlavorResource, int], node: Node, tree: QuotaTree, candidates: list[Admitted]
) -> bool:
    """A necessary condition, checked before any eviction is tried: evicting a workload frees
    at most what it holds, so a request larger than what is available plus everything the
    candidates hold cannot fit whatever is chosen."""
    freeable: dict[FlavorResource, int] = {}
    for candidate in candidates:
        for fr, value in candidate.usage.items():
            freeable[fr] = freeable.get(fr, 0) + value
    return all(
        value <= tree.available(node, fr) + freeable.get(fr, 0) for fr, value in request.items()
    )


def _under_nominal(node: Node, frs: frozenset[FlavorResource]) -> bool:
    return all(node.usage.get(fr, 0) < node.nominal(fr) for fr in frs)


def admission_rank(admitted: Admitted) -> tuple[int, int]:
    """The order each pool's admitted list is kept in: by priority, then admission order."""
    return admitted.priority, admitted.sequence


def _ranked_below(ranked: list[Admitted], priority: int, *, include_equal: bool) -> list[Admitted]:
    # `ranked` is sorted by admission_rank: the candidates of lower priority are a prefix.
    cut = bisect.bisect_right if include_equal else bisect.bisect_left
    return ranked[: cut(ranked, priority, key=lambda a: a.priority)]


def _uses_any(candidate: Admitted, frs: frozenset[FlavorResource]) -> bool:
    return any(candidate.usage.get(fr, 0) > 0 for fr in frs)
