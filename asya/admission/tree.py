"""Quota and usage through the cohort tree: the arithmetic Kueue does in `resource_node.go`.

Every pool and cohort is a node. Per (flavor, resource):
- `subtree` quota: a pool's nominal; a cohort's own nominal plus what each child lends it
  (the child's subtree quota less its *local* quota);
- `local` quota: what a lending limit keeps out of the cohort's reach
  (`max(0, subtree - lendingLimit)`, 0 with no limit);
- `usage`: a pool's admitted requests; a cohort's is what its children use beyond their local
  quota.
`available` walks up the tree, bounded at each step by the borrowing limit; `add_usage` and
`remove_usage` bubble usage up past local quota; `borrowing_level` says how far up a request
must borrow. Values may go negative after over-admission
(quota shrunk under running work); callers treat negative availability as none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from asya.admission.model import Cohort, FlavorResource, Pool
from asya.admission.quotas import FlavorQuotas, quota_milli


@dataclass(frozen=True, slots=True)
class Limits:
    """One resource's quota in one flavor of a node, in milli-units."""

    nominal: int
    borrowing_limit: int | None = None
    """None: no limit."""
    lending_limit: int | None = None
    """None: lends all of it."""


_NO_QUOTA = Limits(nominal=0)


class Node:
    """A pool or a cohort."""

    __slots__ = ("children", "height", "is_pool", "name", "parent", "quotas", "subtree", "usage")

    def __init__(self, name: str, *, is_pool: bool, quotas: Iterable[FlavorQuotas]) -> None:
        self.name = name
        self.is_pool = is_pool
        self.parent: Node | None = None
        self.children: list[Node] = []
        self.quotas: dict[FlavorResource, Limits] = {
            (fq.flavor, quota.name): Limits(*quota_milli(quota))
            for fq in quotas
            for quota in fq.resources
        }
        self.subtree: dict[FlavorResource, int] = {}
        self.usage: dict[FlavorResource, int] = {}
        self.height = 0
        """Distance to the furthest pool below (a pool: 0), Kueue's `getNodeHeight`."""

    def nominal(self, fr: FlavorResource) -> int:
        return self.quotas.get(fr, _NO_QUOTA).nominal

    def local_quota(self, fr: FlavorResource) -> int:
        """Capacity kept for this subtree by a lending limit; never lent to the parent."""
        lending = self.quotas.get(fr, _NO_QUOTA).lending_limit
        return 0 if lending is None else max(0, self.subtree.get(fr, 0) - lending)

    def local_available(self, fr: FlavorResource) -> int:
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    def root(self) -> Node:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def __repr__(self) -> str:
        return f"Node({'pool' if self.is_pool else 'cohort'} {self.name})"


class QuotaTree:
    """All nodes of a scenario, with quota computed and usage tracked."""

    def __init__(self, cohorts: Iterable[Cohort], pools: Iterable[Pool]) -> None:
        self.cohorts: dict[str, Node] = {
            c.name: Node(c.name, is_pool=False, quotas=c.quotas) for c in cohorts
        }
        self.pools: dict[str, Node] = {}
        parents = {c.name: c.parent for c in cohorts}
        for pool in pools:
            node = Node(pool.name, is_pool=True, quotas=pool.quotas)
            self.pools[pool.name] = node
            if pool.cohort is not None:
                # A pool may name a cohort nobody defined: it exists, with no quota of its own.
                cohort = self.cohorts.setdefault(
                    pool.cohort, Node(pool.cohort, is_pool=False, quotas=())
                )
                _attach(node, cohort)
        for name, parent in parents.items():
            if parent is not None:
                parent_node = self.cohorts.setdefault(
                    parent, Node(parent, is_pool=False, quotas=())
                )
                _attach(self.cohorts[name], parent_node)
        for node in [*self.cohorts.values(), *self.pools.values()]:
            if node.parent is None:
                _compute_subtree(node)
                _compute_height(node)
        self._members: dict[tuple[bool, str], list[Node]] = {}
        """`subtree_pools` by (is a pool, name): a pool and a cohort may share a name."""

    def available(self, node: Node, fr: FlavorResource) -> int:
        """What `node` could still take now: local quota left plus what its cohort allows."""
        if node.parent is None:
            return node.subtree.get(fr, 0) - node.usage.get(fr, 0)
        from_parent = self.available(node.parent, fr)
        borrowing = node.quotas.get(fr, _NO_QUOTA).borrowing_limit
        if borrowing is not None:
            local = node.local_quota(fr)
            stored_in_parent = node.subtree.get(fr, 0) - local
            used_in_parent = max(0, node.usage.get(fr, 0) - local)
            from_parent = min(stored_in_parent - used_in_parent + borrowing, from_parent)
        return node.local_available(fr) + from_parent

    def potential_available(self, node: Node, fr: FlavorResource) -> int:
        """What `node` could take if nothing were in use, borrowing limits respected."""
        if node.parent is None:
            return node.subtree.get(fr, 0)
        total = node.local_quota(fr) + self.potential_available(node.parent, fr)
        borrowing = node.quotas.get(fr, _NO_QUOTA).borrowing_limit
        if borrowing is not None:
            total = min(node.subtree.get(fr, 0) + borrowing, total)
        return total

    def add_usage(self, node: Node, usage: Mapping[FlavorResource, int]) -> None:
        for fr, value in usage.items():
            _add(node, fr, value)

    def remove_usage(self, node: Node, usage: Mapping[FlavorResource, int]) -> None:
        for fr, value in usage.items():
            _remove(node, fr, value)

    @staticmethod
    def borrowing_with(node: Node, fr: FlavorResource, value: int) -> bool:
        """Whether taking `value` more would put the pool past its nominal quota."""
        return node.usage.get(fr, 0) + value > node.nominal(fr)

    def borrowing_level(self, node: Node, fr: FlavorResource, value: int) -> int:
        """How far up the tree the pool `node` must reach to add `value` of `fr` to its usage:
        0 within its nominal quota or without a cohort, else the height of the lowest cohort
        whose subtree still has room, or of the root where none has (Kueue's
        `FindHeightOfLowestSubtreeThatFits`). The scheduler admits the entry that borrows
        closest to its pool first."""
        if node.parent is None or not self.borrowing_with(node, fr, value):
            return 0
        remaining = value - node.local_available(fr)
        cohort = node.parent
        while cohort.usage.get(fr, 0) + remaining > cohort.subtree.get(fr, 0):
            if cohort.parent is None:
                break
            remaining -= cohort.local_available(fr)
            cohort = cohort.parent
        return cohort.height

    @staticmethod
    def is_borrowing(node: Node, frs: Iterable[FlavorResource]) -> bool:
        return any(node.usage.get(fr, 0) > node.nominal(fr) for fr in frs)

    def subtree_pools(self, root: Node) -> list[Node]:
        """The pools under `root` (the tree's shape never changes, so this is cached)."""
        found = self._members.get((root.is_pool, root.name))
        if found is None:
            found, stack = [], [root]
            while stack:
                node = stack.pop()
                if node.is_pool:
                    found.append(node)
                stack.extend(node.children)
            self._members[root.is_pool, root.name] = found
        return found


def _attach(child: Node, parent: Node) -> None:
    child.parent = parent
    parent.children.append(child)


def _compute_subtree(node: Node) -> None:
    node.subtree = {fr: q.nominal for fr, q in node.quotas.items()}
    for child in node.children:
        _compute_subtree(child)
        for fr, quota in child.subtree.items():
            node.subtree[fr] = node.subtree.get(fr, 0) + quota - child.local_quota(fr)


def _compute_height(node: Node) -> None:
    # A cohort with only pools below is 1 high; a pool is 0. The levels a request can borrow at
    # therefore rise as it goes up, though not always one by one (Kueue's numbering).
    for child in node.children:
        _compute_height(child)
    node.height = max(
        [min(len(node.children), 1)] + [c.height + 1 for c in node.children if not c.is_pool]
    )


def _add(node: Node, fr: FlavorResource, value: int) -> None:
    local_available = node.local_available(fr)
    node.usage[fr] = node.usage.get(fr, 0) + value
    if node.parent is not None and value > local_available:
        _add(node.parent, fr, value - local_available)


def _remove(node: Node, fr: FlavorResource, value: int) -> None:
    stored_in_parent = node.usage.get(fr, 0) - node.local_quota(fr)
    node.usage[fr] = node.usage.get(fr, 0) - value
    if stored_in_parent > 0 and node.parent is not None:
        _remove(node.parent, fr, min(value, stored_in_parent))
