"""The reference pages promise what the code does: the failure reasons (docs/envelopes.md) and
the settings (docs/settings.md) the README maps to are checked against the code. The README's
and the guides' commands are run by tests/docs."""

from __future__ import annotations

import re
from pathlib import Path

from asya.envelope import Limits, Reason
from asya.settings import (
    GangSettings,
    ProcessSettings,
    RuntimeSettings,
    SidecarSettings,
    TransportSettings,
    describe_settings,
)

DOCS = Path(__file__).resolve().parents[2] / "docs"
ENVELOPES = DOCS / "envelopes.md"
SETTINGS = DOCS / "settings.md"


def _table_after(page: Path, heading_cell: str) -> list[list[str]]:
    lines = page.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {heading_cell} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_failure_table_names_every_reason_and_nothing_else():
    documented = [re.sub(r"`", "", row[0]) for row in _table_after(ENVELOPES, "reason")]

    assert sorted(documented) == sorted(reason.value for reason in Reason)


def _documented_settings() -> dict[str, object]:
    documented: dict[str, object] = {}
    for variables, defaults, _ in _table_after(SETTINGS, "variable"):
        names = [v.strip(" `") for v in variables.split(",")]
        full = [names[0]] + [names[0].rsplit("_", 1)[0] + n for n in names[1:]]
        values = [d.strip(" `") for d in defaults.split(",")] if len(names) > 1 else [defaults]
        for name, value in zip(full, values, strict=True):
            documented[name] = _default(value)
    return documented


def _default(cell: str) -> object:
    text = cell.strip(" `").split(" (")[0]
    if text == "unset":
        return None
    if text in ("true", "false"):
        return text == "true"
    try:
        return float(text)
    except ValueError:
        return text


def test_the_settings_table_lists_every_variable_with_its_default():
    groups = (
        Limits,
        TransportSettings,
        SidecarSettings,
        RuntimeSettings,
        ProcessSettings,
        GangSettings,
    )
    actual = {
        s.variable: s.default
        if isinstance(s.default, bool) or not isinstance(s.default, int | float)
        else float(s.default)
        for s in describe_settings(*groups)
    }

    assert _documented_settings() == actual
