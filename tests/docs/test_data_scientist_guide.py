"""docs/guide-data-scientist.md tells the truth about its example: the script it starts from
and the pipeline it ends with give every ticket the same label and the same review, the
summary it shows counts what a run counts, and the values it hands off are what `asya render`
writes. (Its commands and its quoted files are checked with every guide's, in test_pages.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from asya.testing import run
from tests.docs.commands import has_gpu
from tests.docs.pages import DOCS, ROOT, blocks

GUIDE = DOCS / "guide-data-scientist.md"
APP = ROOT / "examples" / "first-day"
INPUTS = [json.loads(line) for line in (APP / "inputs.jsonl").read_text().splitlines()]


def _block(language: str, containing: str) -> str:
    [text] = [b.text for b in blocks(GUIDE) if b.language == language and containing in b.text]
    return text


def test_the_script_and_the_pipeline_label_and_route_every_ticket_alike(tmp_path):
    # Given: the script as the guide shows it, next to the example's model
    [script] = [b for b in blocks(GUIDE) if b.label == "triage_script.py"]
    (tmp_path / "triage_script.py").write_text(script.text)

    # When: the script runs over the example's tickets, and so does the pipeline
    done = subprocess.run(
        [sys.executable, "triage_script.py", str(APP / "inputs.jsonl")],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(APP)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    before = [json.loads(line) for line in done.stdout.splitlines()]
    after = run(str(APP), INPUTS).payloads

    # Then: the same ticket, label and review, in the same order, at the same confidence
    assert [(d["ticket"], d["label"], d["needs_review"]) for d in before] == [
        (d["ticket"], d["label"], d["needs_review"]) for d in after
    ]
    assert [d["confidence"] for d in before] == pytest.approx(
        [d["confidence"] for d in after], abs=0.002
    )
    assert {d["ticket"] for d in after if d["needs_review"]} == {"T-105", "T-110", "T-113"}


def _rows(summary: str) -> dict[str, list[str]]:
    lines = summary.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("actor ")) + 2
    rows = {}
    for line in lines[start:]:
        if not line.strip():
            break
        name, *cells = line.split()
        rows[name] = cells
    return rows


def test_the_summary_the_guide_shows_counts_what_a_run_counts():
    shown = _block("", "final envelopes:")

    done = subprocess.run(
        [sys.executable, "-m", "asya.cli", "dev", str(APP), "--input", str(APP / "inputs.jsonl")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    printed, expected = _rows(done.stderr), _rows(shown)
    assert done.returncode == 0, done.stderr
    assert list(printed) == list(expected) == ["clean", "embed", "classify", "human-review"]
    assert {name: cells[0] for name, cells in printed.items()} == {
        name: cells[0] for name, cells in expected.items()
    }  # envelopes: 16 tickets, 3 reviewed
    assert int(printed["classify"][2]) > 0  # retried: the dropped requests
    assert int(expected["classify"][2]) > 0
    assert "embed: model ready, 512 dimensions" in shown
    assert "embed: model ready, 512 dimensions" in done.stderr  # a handler's print: stderr
    assert "model ready" not in done.stdout
    notice = next(line for line in shown.splitlines() if "run on CPU" in line)
    if not has_gpu():
        assert notice.split(" (NVML")[0] in done.stderr
    assert re.search(r"final envelopes: 16 \(16 succeeded, 0 failed\)", done.stderr)


def test_the_values_the_guide_hands_off_are_what_asya_render_writes(tmp_path):
    shown = yaml.safe_load(_block("yaml", "handler: triage:Embed"))
    out = tmp_path / "values.yaml"
    render = ["render", str(APP), "--image", shown["image"], "-o", str(out)]

    subprocess.run(
        [sys.executable, "-m", "asya.cli", *render],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    )

    assert yaml.safe_load(out.read_text()) == shown
