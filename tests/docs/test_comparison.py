"""docs/comparison.md quotes benchmark figures only from the result files in bench/results/,
and quotes them as those files hold them."""

from __future__ import annotations

import json
import re

import pytest

from tests.docs.pages import DOCS, ROOT

PAGE = DOCS / "comparison.md"


def _table_after(header: str) -> list[list[str]]:
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index(header) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_every_result_file_the_page_names_exists():
    named = set(re.findall(r"bench/results/[\w.-]+\.json", PAGE.read_text(encoding="utf-8")))

    assert named
    assert all((ROOT / name).is_file() for name in named)


def _source() -> dict:
    """The result file the page's benchmark section says its tables are from."""
    found = re.search(r"From `(bench/results/[\w.-]+\.json)`", PAGE.read_text(encoding="utf-8"))
    assert found is not None, "the benchmark section names no result file"
    return json.loads((ROOT / found.group(1)).read_text())


def test_the_throughput_ratios_are_the_result_files():
    ratios = _source()["ratios"]

    rows = _table_after("| queue | ratio | value |")

    assert len(rows) == 10
    for queue, ratio, value in rows:
        assert float(value) == pytest.approx(ratios[queue][ratio], abs=5e-4), (queue, ratio)


def test_the_device_utilisation_is_the_result_files():
    measured = {
        (row["path"], row["transport"], row["batch"], row["device_ms"]): row["share"]
        for row in _source()["utilisation"]["rows"]
    }

    rows = _table_after("| path | transport | batch | device ms per call | share |")

    assert rows
    for path, transport, batch, device_ms, share in rows:
        assert measured[(path, transport, int(batch), float(device_ms))] == float(share)
