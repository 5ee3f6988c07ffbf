"""`asya admission simulate` on the documented example scenarios."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asya.cli import main

SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "admission"


def simulate(capsys, name, *extra):
    code = main(["admission", "simulate", str(SCENARIOS / name), *extra])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out else None, captured.err


def names(entries):
    return {e["workload"] for e in entries}


def test_team_quotas_borrow_within_the_lending_limit(capsys):
    code, out, _ = simulate(capsys, "team-quotas.yaml")

    borrowing = {a["workload"]: a["borrowing"] for a in out["admitted"]}
    pending = {p["workload"]: p for p in out["pending"]}
    assert code == 0
    assert borrowing == {"a-embed": False, "b-finetune": True}
    assert "may borrow 0 more from cohort eng" in pending["b-eval"]["message"]
    assert pending["stray"]["reason"] == "NamespaceNotAllowed"


def test_priority_preemption_evicts_exactly_the_lowest(capsys):
    _, out, _ = simulate(capsys, "priority-preemption.yaml")

    assert out["preempted"] == [
        {"workload": "batch-scoring", "preemptor": "incident-triage", "reason": "InPool"}
    ]
    assert "incident-triage" in names(out["admitted"])


def test_gangs_wait_whole_and_elastic_actors_take_what_fits(capsys):
    _, out, _ = simulate(capsys, "gangs.yaml")

    admitted = {a["workload"]: a["podSets"] for a in out["admitted"]}
    assert admitted["elastic-embedder"] == [{"name": "replica", "flavor": "h100", "count": 3}]
    assert "ddp-gang" in names(out["pending"])


def test_reclaim_takes_back_lent_quota(capsys):
    _, out, _ = simulate(capsys, "reclaim.yaml")

    assert out["preempted"] == [
        {"workload": "b-borrowed", "preemptor": "a-train", "reason": "InCohortReclamation"}
    ]


def test_cycles_limits_the_run(capsys):
    _, out, _ = simulate(capsys, "priority-preemption.yaml", "--cycles", "1")

    assert (out["cycles"], out["quiescent"]) == (1, False)


@pytest.mark.parametrize(
    ("content", "suffix", "expected"),
    [
        ("pools: [{name: a, quotas: 3}]", ".yaml", "invalid scenario: Expected `array`"),
        ("[1, 2]", ".json", "a scenario is a mapping"),
        ("{not json", ".json", "not valid JSON"),
        ("pools: [{name: a}, {name: a}]", ".yaml", "pool 'a' is defined twice"),
        ("cohorts: [{name: x, parent: y}, {name: y, parent: x}]", ".yaml", "cohorts form a loop"),
        (
            "pools: [{name: a, quotas: [{flavor: f, resources: {cpu: {nominal: lots}}}]}]",
            ".yaml",
            "expected a quantity such as 2",
        ),
    ],
)
def test_a_bad_scenario_is_refused_with_what_to_fix(capsys, tmp_path, content, suffix, expected):
    path = tmp_path / f"scenario{suffix}"
    path.write_text(content)

    code = main(["admission", "simulate", str(path)])

    assert code == 2
    assert expected in capsys.readouterr().err


@pytest.mark.parametrize("name", ["quickstart.yaml", "gpu-teams.yaml"])
def test_a_file_of_custom_resources_is_refused_with_the_command_that_reads_it(capsys, name):
    path = SCENARIOS.parent / "operator" / name

    code = main(["admission", "simulate", str(path)])

    err = capsys.readouterr().err
    assert code == 2
    assert "holds Kubernetes objects (" in err
    assert f"run `asya-operator plan {path}`" in err
    assert "expected a single document" not in err
