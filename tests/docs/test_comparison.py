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


def test_the_throughput_ratios_are_the_result_files():
    ratios = json.loads((ROOT / "bench/results/2026-11-26-2cores.json").read_text())["ratios"]

    rows = _table_after("| queue | ratio | value |")

    assert len(rows) == 10
    for queue, ratio, value in rows:
        assert float(value) == pytest.approx(ratios[queue][ratio], abs=5e-4), (queue, ratio)


def test_the_device_utilisation_is_the_result_files():
    results = json.loads((ROOT / "bench/results/2026-11-26-2cores-utilisation.json").read_text())
    measured = {
        (row["path"], row["transport"], row["device_ms"]): row["share"]
        for row in results["utilisation"]["rows"]
        if row["batch"] == 32
    }

    rows = _table_after("| path | transport | device ms per batch | share |")

    assert rows
    for path, transport, device_ms, share in rows:
        assert measured[(path, transport, float(device_ms))] == float(share)
