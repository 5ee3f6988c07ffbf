"""A call is complete exactly when every branch of its fan-out tree has ended."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asya.envelope import Branch
from asya.lineage import Completion, share_of


def lineage(*steps):
    """`lineage((2, 3), (1, 2))`: child 2 of 3, then child 1 of 2."""
    return tuple(Branch(index=i, of=n) for i, n in steps)


def completes(arrivals):
    """Whether the tree is complete after each arrival, in order."""
    completion = Completion()
    states = []
    for arrival in arrivals:
        completion.add(arrival)
        states.append(completion.is_complete)
    return states


@pytest.mark.parametrize(
    ("arrivals", "expected"),
    [
        pytest.param([()], [True], id="no-fan-out-one-final"),
        pytest.param(
            [lineage((1, 3)), lineage((3, 3)), lineage((2, 3))],
            [False, False, True],
            id="three-children-any-order",
        ),
        pytest.param(
            [lineage((1, 2)), lineage((2, 2), (1, 2)), lineage((2, 2), (2, 2))],
            [False, False, True],
            id="nested-fan-out",
        ),
        pytest.param(
            [lineage((2, 2), (1, 2)), lineage((1, 2)), lineage((2, 2), (2, 2))],
            [False, False, True],
            id="nested-fan-out-grandchild-first",
        ),
        pytest.param(
            [lineage((1, 2), (1, 1)), lineage((2, 2))],
            [False, True],
            id="a-child-fanned-out-to-one",
        ),
        pytest.param(
            [lineage((1, 2)), lineage((1, 2)), lineage((2, 2))],
            [False, False, True],
            id="a-redelivered-final-counts-once",
        ),
        pytest.param(
            [lineage((1, 2)), lineage((1, 2), (1, 3)), lineage((2, 2))],
            [False, False, True],
            id="a-descendant-of-a-counted-leaf-adds-nothing",
        ),
        pytest.param(
            [lineage((1, 2), (1, 3)), lineage((1, 2)), lineage((2, 2))],
            [False, False, False],
            id="an-ancestor-of-a-counted-leaf-adds-nothing",
        ),
    ],
)
def test_completeness_after_each_final(arrivals, expected):
    assert completes(arrivals) == expected


def test_a_final_seen_before_is_not_new():
    completion = Completion()

    first = completion.add(lineage((1, 2)))
    again = completion.add(lineage((1, 2)))

    assert (first, again) == (True, False)


def test_a_leaf_stands_for_its_share_of_the_tree():
    assert share_of(lineage((2, 3), (1, 4))) == Fraction(1, 12)


# A tree: None is a leaf; a list is a generator's children (an empty list ends itself: a leaf).
trees = st.recursive(st.none(), lambda children: st.lists(children, max_size=4), max_leaves=24)


def leaves_of(tree, path=()):
    if not tree:
        return [path]
    return [
        leaf
        for index, child in enumerate(tree, start=1)
        for leaf in leaves_of(child, (*path, Branch(index=index, of=len(tree))))
    ]


@given(tree=trees, data=st.data())
def test_a_tree_is_complete_exactly_when_its_last_leaf_arrives(tree, data):
    leaves = data.draw(st.permutations(leaves_of(tree)))
    redelivered = data.draw(st.lists(st.sampled_from(range(len(leaves))), max_size=4))
    arrivals = [(leaf, True) for leaf in leaves]
    for position in sorted(redelivered, reverse=True):
        arrivals.insert(position + 1, (leaves[position], False))

    completion = Completion()
    states = []
    for leaf, is_first in arrivals:
        assert completion.add(leaf) is is_first
        states.append(completion.is_complete)

    last_new = max(i for i, (_, is_first) in enumerate(arrivals) if is_first)
    assert states == [i >= last_new for i in range(len(arrivals))]
