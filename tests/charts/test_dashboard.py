"""The Grafana dashboard beside the operator chart: valid, about metrics we export, shipped."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import yaml
from asya_operator.metrics import REGISTRY as OPERATOR_REGISTRY

from asya.metrics import Metrics
from tests.charts.chart_checks import (
    OPERATOR_CHART,
    OPERATOR_IMAGES,
    lint_problems,
    of_kind,
    rendered,
    validation_problems,
)

DASHBOARD = OPERATOR_CHART / "dashboards" / "asya.json"
_SERIES_SUFFIXES = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum"),
}


def _series(families: dict[str, str]) -> dict[str, str]:
    """Each series name a family exports (`asya_x_total`, `asya_y_bucket`) -> its family."""
    return {
        name + suffix: name for name, kind in families.items() for suffix in _SERIES_SUFFIXES[kind]
    }


def _exported() -> dict[str, str]:
    operator = {family.name: family.type for family in OPERATOR_REGISTRY.collect()}
    return _series({**Metrics().family_names(), **operator})


def _queries(dashboard: dict) -> list[str]:
    return [
        target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])
    ] + [
        variable["definition"]
        for variable in dashboard["templating"]["list"]
        if variable["type"] == "query"
    ]


def test_every_query_names_only_metrics_we_export_and_every_actor_metric_is_shown():
    dashboard = json.loads(DASHBOARD.read_text())

    queries = _queries(dashboard)

    exported = _exported()
    named = {name for query in queries for name in re.findall(r"\basya_[a-z_]+\b", query)}
    assert named, "the dashboard queries no asya metric"
    assert named - exported.keys() == set()
    shown = {exported[name] for name in named}
    assert set(Metrics().family_names()) <= shown
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(dashboard["panels"])


def _chart_with_the_value_declared(tmp_path: Path) -> Path:
    """The operator chart, with `grafana.dashboard.enabled` in its values and schema."""
    chart = tmp_path / "asya-operator"
    shutil.copytree(OPERATOR_CHART, chart)
    values = yaml.safe_load((chart / "values.yaml").read_text())
    values.setdefault("grafana", {"dashboard": {"enabled": False}})
    (chart / "values.yaml").write_text(yaml.safe_dump(values))
    schema = json.loads((chart / "values.schema.json").read_text())
    schema["properties"].setdefault(
        "grafana",
        {
            "type": "object",
            "properties": {
                "dashboard": {"type": "object", "properties": {"enabled": {"type": "boolean"}}}
            },
        },
    )
    (chart / "values.schema.json").write_text(json.dumps(schema))
    return chart


def test_the_dashboard_ships_as_a_labelled_config_map_when_enabled(tmp_path):
    chart = _chart_with_the_value_declared(tmp_path)
    values = {**OPERATOR_IMAGES, "grafana": {"dashboard": {"enabled": True}}}

    objects = rendered(chart, values)

    (config_map,) = of_kind(objects, "ConfigMap").values()
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["asya.json"]) == json.loads(DASHBOARD.read_text())
    assert validation_problems(config_map) == []
    assert lint_problems(chart, values) == []


def test_no_dashboard_by_default():
    objects = rendered(OPERATOR_CHART, OPERATOR_IMAGES)

    assert of_kind(objects, "ConfigMap") == {}
