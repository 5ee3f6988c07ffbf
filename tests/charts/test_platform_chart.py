"""The asya-platform chart: a cluster's ResourceFlavors, ResourcePools and Cohorts, installed
once, apart from the teams' asya-pipeline releases; rendered and linted by real Helm, every
object validated against our CRDs (schema and CEL rules)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from asya_operator import cli as operator_cli

from tests.charts.chart_checks import (
    NAMESPACE,
    OPERATOR_CHART,
    PIPELINE_CHART,
    PLATFORM_CHART,
    RELEASE,
    check_all,
    lint_problems,
    notes,
    of_kind,
    rendered,
    values_error,
)

ROOT = Path(__file__).resolve().parents[2]
GPU_TEAMS = ROOT / "examples" / "platform" / "gpu-teams.yaml"
GPU_TEAMS_CRS = ROOT / "examples" / "operator" / "gpu-teams.yaml"
CLUSTER_SCOPED = ("ResourceFlavor", "ResourcePool", "Cohort")


def _gpu_teams() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load(GPU_TEAMS.read_text(encoding="utf-8"))
    return values


VALUE_SETS = {
    "defaults": {},
    "a flavor with tolerations": {
        "flavors": {
            "h100": {
                "nodeLabels": {"nvidia.com/gpu.product": "H100-SXM"},
                "tolerations": [
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                ],
            }
        }
    },
    "two teams on a cohort (examples/platform/gpu-teams.yaml)": _gpu_teams(),
    "labels": {"cohorts": {"eng": {}}, "commonLabels": {"example.com/owner": "platform"}},
}


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_every_value_set_renders_valid_cluster_scoped_objects_and_lints_clean(values):
    objects = rendered(PLATFORM_CHART, values)

    check_all(objects)
    assert lint_problems(PLATFORM_CHART, values) == []
    assert {obj["kind"] for obj in objects} <= set(CLUSTER_SCOPED)
    assert not [obj for obj in objects if "namespace" in obj["metadata"]]


BAD_VALUES = {
    "an unknown queueing strategy": (
        {"resourcePools": {"p": {"queueingStrategy": "Fastest"}}},
        "/resourcePools/p/queueingStrategy",
    ),
    "an unknown flavor field": (
        {"flavors": {"h100": {"nodeLabel": {}}}},
        "'nodeLabel' not allowed",
    ),
    "a cohort name with capitals": ({"cohorts": {"Eng": {}}}, "'Eng'"),
    "an unknown top-level key": ({"actors": {}}, "'actors' not allowed"),
}


@pytest.mark.parametrize(("values", "named"), BAD_VALUES.values(), ids=BAD_VALUES.keys())
def test_bad_values_are_refused_at_render_naming_the_field(values, named):
    assert named in values_error(PLATFORM_CHART, values)


def test_each_object_is_created_by_name_as_given_with_the_labels():
    values = _gpu_teams()
    values["commonLabels"] = {"example.com/owner": "platform"}

    objects = rendered(PLATFORM_CHART, values)

    for kind, key in zip(CLUSTER_SCOPED, ("flavors", "resourcePools", "cohorts"), strict=True):
        made = of_kind(objects, kind)
        assert {name: obj["spec"] for name, obj in made.items()} == values[key]
        assert all(
            obj["metadata"]["labels"]["example.com/owner"] == "platform" for obj in made.values()
        )
        assert all(
            obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == RELEASE
            for obj in made.values()
        )


def test_the_example_is_the_quota_of_the_gpu_teams_crs():
    crs = [doc for doc in yaml.safe_load_all(GPU_TEAMS_CRS.read_text(encoding="utf-8")) if doc]

    objects = rendered(PLATFORM_CHART, _gpu_teams())

    def specs(docs: list[dict[str, Any]]) -> dict[tuple[str, str], Any]:
        return {
            (d["kind"], d["metadata"]["name"]): d.get("spec") or {}
            for d in docs
            if d["kind"] in CLUSTER_SCOPED
        }

    assert specs(objects) == specs(crs)


def test_two_teams_pipelines_and_the_platform_own_no_object_in_common():
    platform = rendered(PLATFORM_CHART, _gpu_teams())
    team_a = rendered(
        PIPELINE_CHART,
        {
            "image": "registry.example.com/ml/embed:1",
            "namespace": "ml-a",
            "actorDefaults": {"pool": "team-a", "flavor": "h100"},
            "actors": {"embed": {"handler": "ml.embed:Embed"}},
        },
    )
    team_b = rendered(
        PIPELINE_CHART,
        {
            "image": "registry.example.com/ml/embed:2",
            "namespace": "ml-b",
            "actorDefaults": {"pool": "team-b", "flavor": "h100"},
            "actors": {"embed": {"handler": "ml.embed:Embed"}},
        },
    )

    def owned(objects: list[dict[str, Any]]) -> set[tuple[str, str | None, str]]:
        return {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects}

    assert not owned(team_a) & owned(team_b)
    assert not (owned(team_a) | owned(team_b)) & owned(platform)
    assert {kind for kind, _ns, _name in owned(team_a) | owned(team_b)} == {"AsyncActor"}


def test_the_notes_count_what_was_made():
    text = notes(PLATFORM_CHART, _gpu_teams())

    assert "1 ResourceFlavor(s), 2 ResourcePool(s) and 1 Cohort(s)" in text
    assert "kubectl get resourceflavors,resourcepools,cohorts" in text


def test_the_charts_version_is_the_operator_charts():
    def chart(path: Path) -> dict[str, Any]:
        loaded: dict[str, Any] = yaml.safe_load((path / "Chart.yaml").read_text(encoding="utf-8"))
        return loaded

    platform, operator = chart(PLATFORM_CHART), chart(OPERATOR_CHART)

    assert (platform["version"], platform["appVersion"]) == (
        operator["version"],
        operator["appVersion"],
    )
    assert platform["kubeVersion"] == operator["kubeVersion"]


def test_the_operators_plan_admits_a_teams_group_by_the_platforms_pools(tmp_path, capsys):
    group = {
        "pool": "team-a",
        "priority": 10,
        "members": [
            {
                "name": "trainer",
                "replicas": 4,
                "template": {"handler": "ml.train:trainer", "resources": {"gpus": 1}},
            }
        ],
    }
    pools = {
        "flavors": {"h100": {}},
        "cohorts": {"eng": {}},
        "resourcePools": {
            "team-a": {
                "cohort": "eng",
                "quotas": [
                    {
                        "flavor": "h100",
                        "resources": [
                            {"name": "nvidia.com/gpu", "nominal": 4},
                            {"name": "cpu", "nominal": 0},
                            {"name": "memory", "nominal": 0},
                        ],
                    }
                ],
            }
        },
    }
    team = {"image": "registry.example.com/app:1", "actorGroups": {"ddp-train": group}}
    crs = tmp_path / "crs.yaml"
    documents = rendered(PLATFORM_CHART, copy.deepcopy(pools)) + rendered(PIPELINE_CHART, team)
    crs.write_text(yaml.safe_dump_all(documents), encoding="utf-8")

    code = operator_cli.main(["plan", str(crs)])
    out = capsys.readouterr()

    assert code == 0, out.err
    decisions = "\n".join(
        line.removeprefix("# ") for line in out.out.splitlines() if line.startswith("# ")
    )
    assert "1 admitted, 0 pending, 0 preempted" in decisions
    assert f"workload: {NAMESPACE}/ddp-train[0]" in decisions
