"""The operator's shape: its longest import chain, read from the imports as import-linter reads
them (`grimp`). The layers themselves are import-linter contracts in pyproject.toml
(`lint-imports` in scripts/test); this holds what a contract cannot say, how deep the house is."""

from __future__ import annotations

import functools
import itertools

import grimp

MAX_CHAIN = 8
"""cli > operator > handlers > reconcile > kube > api.decoding > api.schema > api.template."""


def _longest_chain(package: str) -> tuple[str, ...]:
    graph = grimp.build_graph(package)
    inside = {m for m in graph.modules if m.startswith(package)}

    @functools.cache
    def longest(module: str) -> tuple[str, ...]:
        below = graph.find_modules_directly_imported_by(module) & inside
        return (module, *max((longest(m) for m in below if m != module), key=len, default=()))

    return max((longest(m) for m in sorted(inside)), key=len)


def test_the_operators_longest_import_chain_is_at_most_eight_modules():
    chain = _longest_chain("asya_operator")
    shown = " > ".join(m.removeprefix("asya_operator.") for m in chain)
    assert len(chain) <= MAX_CHAIN, f"{len(chain)} modules deep: {shown}"


def test_the_chain_measured_is_a_real_one_from_the_command_line_down():
    # The measure itself: each step is a direct import, from the entry point to a leaf.
    graph = grimp.build_graph("asya_operator")
    chain = _longest_chain("asya_operator")
    assert chain[0] == "asya_operator.cli"
    for upper, lower in itertools.pairwise(chain):
        assert graph.direct_import_exists(importer=upper, imported=lower), (upper, lower)
    leaf_imports = graph.find_modules_directly_imported_by(chain[-1])
    assert not {m for m in leaf_imports if m.startswith("asya_operator")}
