"""`asya-operator plan` on CRs decides as `asya admission simulate` does on the same scenario.

Each scenario of examples/admission/ is written as CRs in examples/operator/admission/ (same
file name). Workload names differ only by the CRs' namespace and instance
(`default/ddp-gang[0]` for `ddp-gang`); everything else must be equal: who is admitted with
which flavor and count, who is preempted by whom and why, who is pending and the message.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from asya_operator.cli import main as operator_main

from asya.cli import main as asya_main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCENARIOS = sorted(path.name for path in (EXAMPLES / "operator" / "admission").glob("*.yaml"))


def simulated(capsys, name):
    assert asya_main(["admission", "simulate", str(EXAMPLES / "admission" / name)]) == 0
    return json.loads(capsys.readouterr().out)


def planned(capsys, name):
    assert operator_main(["plan", str(EXAMPLES / "operator" / "admission" / name)]) == 0
    out = capsys.readouterr().out
    block = out[out.index("# admitted:") :]
    return yaml.safe_load("\n".join(line[2:] for line in block.splitlines()))


def scenario_name(workload):
    """`default/ddp-gang[0]` -> `ddp-gang`: the name the scenario file gives the workload."""
    return re.fullmatch(r"[a-z0-9-]+/([a-z0-9-]+)(\[0\])?", workload).group(1)


def as_scenario_names(decided):
    """The plan's decisions in simulate's shape: scenario names, no kind, pool or note."""
    entries = [*decided["admitted"], *decided["preempted"], *decided["pending"]]
    text = json.dumps(decided)
    for workload in sorted({e["workload"] for e in entries}, key=len, reverse=True):
        text = text.replace(workload, scenario_name(workload))
    out = json.loads(text)
    for entry in [*out["admitted"], *out["preempted"], *out["pending"]]:
        entry.pop("kind")
        entry.pop("note", None)
    for entry in out["pending"]:
        entry.pop("pool")
    out["pending"].sort(key=lambda entry: entry["workload"])
    return out


def test_every_scenario_of_examples_admission_has_its_crs():
    assert sorted(path.name for path in (EXAMPLES / "admission").glob("*.yaml")) == SCENARIOS


@pytest.mark.parametrize("name", SCENARIOS)
def test_plan_on_the_crs_decides_as_simulate_on_the_scenario(capsys, name):
    expected = simulated(capsys, name)

    decided = planned(capsys, name)

    assert as_scenario_names(decided) == expected
