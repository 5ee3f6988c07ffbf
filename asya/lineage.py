"""When a call is over: accounting for every branch of its fan-out tree from its finals alone.

An envelope a client sends may fan out (a generator yields children), its children again, to
any depth; each branch ends in one final envelope at `happy-end` or `error-end`. Routing gives
every fan-out child its parent's `lineage` plus `Branch(index=i, of=n)` (`asya.routing`), so a
final envelope says where in the tree it ended and how many siblings each of its ancestors
had. A leaf at depth d with sibling counts n1..nd stands for 1/(n1*...*nd) of the tree; the
call is complete when the distinct leaves seen add up to the whole. That needs no message
from the mesh other than the finals, so it holds on every transport; a branch that fans out
to zero children, or fails before fanning out, is simply a leaf.

Pure: no I/O, no clock. `asya.client` feeds it the finals arriving on a call's reply queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from asya.envelope import Branch

Path = tuple[int, ...]
"""A branch's child indexes from the root: the `-2-1` of an id `<root>-2-1`, as numbers."""


def path_of(lineage: Sequence[Branch]) -> Path:
    """The child indexes of `lineage`, outermost first."""
    return tuple(branch.index for branch in lineage)


def share_of(lineage: Sequence[Branch]) -> Fraction:
    """How much of its call's tree the leaf at `lineage` stands for (1 for no fan-out)."""
    share = Fraction(1)
    for branch in lineage:
        share /= branch.of
    return share


class Completion:
    """The leaves of one call's tree seen so far, and whether they cover all of it.

    A final seen twice (a redelivery) counts once. A final whose branch overlaps one already
    counted (an ancestor or descendant of it: a generator run again after a crash, its second
    run failing or yielding differently) is kept as new but adds nothing, so the sum never
    counts a part of the tree twice.
    """

    def __init__(self) -> None:
        self._seen: set[Path] = set()
        self._counted: set[Path] = set()
        self._inner: set[Path] = set()
        self._covered = Fraction(0)

    def add(self, lineage: Sequence[Branch]) -> bool:
        """Account for a final at `lineage`; False when that branch's final was seen before."""
        path = path_of(lineage)
        if path in self._seen:
            return False
        self._seen.add(path)
        overlaps = path in self._inner or any(path[:k] in self._counted for k in range(len(path)))
        if not overlaps:
            self._counted.add(path)
            self._inner.update(path[:k] for k in range(len(path)))
            self._covered += share_of(lineage)
        return True

    @property
    def is_complete(self) -> bool:
        """Whether every branch of the tree has ended."""
        return self._covered >= 1

    @property
    def covered(self) -> Fraction:
        """The share of the tree whose branches have ended, 0 to 1."""
        return self._covered
