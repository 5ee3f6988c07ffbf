"""The README promises what the code does: its tables are checked against the code."""

from __future__ import annotations

import re
from pathlib import Path

from asya.envelope import Reason

README = Path(__file__).resolve().parents[2] / "README.md"


def _table_after(heading_cell: str) -> list[list[str]]:
    lines = README.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {heading_cell} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_failure_table_names_every_reason_and_nothing_else():
    documented = [re.sub(r"`", "", row[0]) for row in _table_after("reason")]

    assert sorted(documented) == sorted(reason.value for reason in Reason)
