"""`asya render` → the asya-pipeline chart → `asya-operator plan`: from decorators to the objects
a cluster would run, each step real (the app imported, Helm rendering, the operator planning)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from asya_operator import cli as operator_cli
from asya_operator.api.crds import async_actor_crd

from asya.actor import ActorOptions
from asya.cli import main as asya_main
from asya.local.discovery import load_app
from tests.charts.chart_checks import (
    NAMESPACE,
    PIPELINE_CHART,
    check_all,
    lint_problems,
    of_kind,
    rendered,
)
from tests.operator.cr_validation import apply_defaults, openapi_schema

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
IMAGE = "example/quickstart:1"
DEFAULTS = ActorOptions()


@pytest.fixture
def quickstart_values(tmp_path, capsys) -> dict[str, Any]:
    out = tmp_path / "v.yaml"
    code = asya_main(["render", str(QUICKSTART), "--image", IMAGE, "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    assert "5 actors written to" in capsys.readouterr().out
    return yaml.safe_load(out.read_text(encoding="utf-8"))


def defaulted(actor: dict[str, Any]) -> dict[str, Any]:
    """The AsyncActor as the API server stores it: the CRD's defaults filled in."""
    return apply_defaults(actor, openapi_schema(async_actor_crd()))["spec"]


def test_the_quickstart_renders_one_async_actor_per_actor_with_its_decorators_settings(
    quickstart_values,
):
    specs = {spec.name: spec for spec in load_app(str(QUICKSTART)).specs}

    actors = of_kind(rendered(PIPELINE_CHART, quickstart_values), "AsyncActor")

    assert set(actors) == set(specs)
    for name, actor in actors.items():
        spec, decorator = defaulted(actor), specs[name]
        assert (spec["image"], spec["handler"]) == (IMAGE, decorator.ref)
        scaling = decorator.scaling
        assert spec["scaling"] == {
            "minReplicas": scaling.min_replicas,
            "maxReplicas": scaling.max_replicas,
            "queueLength": scaling.queue_length,
            "activationQueueLength": scaling.activation,
            "pollingInterval": scaling.polling_interval_s,
            "cooldownPeriod": scaling.cooldown_s,
        }
        assert spec["resources"]["gpus"] == decorator.resources.gpus
        assert spec.get("concurrency", DEFAULTS.concurrency) == decorator.concurrency
        assert spec.get("timeoutSeconds", DEFAULTS.timeout_s) == decorator.timeout_s
        retry = spec.get("retry", {"maxAttempts": 3, "baseDelayMs": 1000})
        assert (retry["maxAttempts"], retry["baseDelayMs"]) == (
            decorator.retry.max_attempts,
            decorator.retry.base_delay_ms,
        )
    assert actors["review"]["spec"]["timeoutSeconds"] == 2.0
    assert actors["normalize"]["spec"]["concurrency"] == 4


def test_the_operator_plans_valid_deployments_and_scaled_objects_for_the_rendered_actors(
    quickstart_values, tmp_path, capsys
):
    objects = rendered(PIPELINE_CHART, quickstart_values)
    check_all(objects)
    assert lint_problems(PIPELINE_CHART, quickstart_values) == []
    crs = tmp_path / "crs.yaml"
    crs.write_text(yaml.safe_dump_all(objects), encoding="utf-8")

    code = operator_cli.main(["plan", str(crs)])
    out = capsys.readouterr()

    assert code == 0, out.err
    planned = [doc for doc in yaml.safe_load_all(out.out) if doc]
    check_all(planned)
    deployments = of_kind(planned, "Deployment")
    scaled = of_kind(planned, "ScaledObject")
    actors = set(of_kind(objects, "AsyncActor"))
    assert actors <= set(deployments)
    assert set(scaled) == actors
    assert {d["metadata"]["namespace"] for d in deployments.values()} == {NAMESPACE}
    runtime = next(
        c
        for c in deployments["review"]["spec"]["template"]["spec"]["containers"]
        if c["name"] == "runtime"
    )
    assert {"name": "ASYA_HANDLER", "value": "quickstart.review:review"} in runtime["env"]
    assert runtime["image"] == IMAGE


def test_an_overlay_is_merged_over_the_rendered_values(tmp_path, capsys):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(
        "actorDefaults: {flavor: general-cpu}\n"
        "actors:\n"
        "  review: {scaling: {maxReplicas: 2}, timeoutSeconds: 5.0}\n"
        "  split: null\n",
        encoding="utf-8",
    )

    code = asya_main(
        ["render", str(QUICKSTART), "--image", IMAGE, "--values-overlay", str(overlay)]
    )
    values = yaml.safe_load(capsys.readouterr().out)

    assert code == 0
    assert "split" not in values["actors"]
    assert values["actorDefaults"] == {"flavor": "general-cpu"}
    review = values["actors"]["review"]
    assert review["timeoutSeconds"] == 5.0
    assert review["scaling"] == {"maxReplicas": 2}
    assert review["retry"]["maxAttempts"] == 2  # the decorator's, kept beside the overlay


def test_render_with_a_namespace_writes_it_and_the_chart_uses_it(capsys):
    asya_main(["render", str(QUICKSTART), "--image", IMAGE, "--namespace", "team-a"])
    values = yaml.safe_load(capsys.readouterr().out)

    objects = rendered(PIPELINE_CHART, values)

    assert values["namespace"] == "team-a"
    assert {obj["metadata"]["namespace"] for obj in objects} == {"team-a"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--image", " "], "--image is empty"),
        (["--image", IMAGE, "--namespace", "Team_A"], "not a Kubernetes namespace name"),
        (["--image", IMAGE, "--values-overlay", "/no/such/file.yaml"], "cannot read it"),
    ],
)
def test_bad_arguments_are_refused_with_exit_2_and_a_message(args, message, capsys):
    code = asya_main(["render", str(QUICKSTART), *args])

    assert code == 2
    assert message in capsys.readouterr().err


def test_an_overlay_that_is_not_a_mapping_is_refused(tmp_path, capsys):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("- just\n- a list\n", encoding="utf-8")

    code = asya_main(
        ["render", str(QUICKSTART), "--image", IMAGE, "--values-overlay", str(overlay)]
    )

    assert code == 2
    assert "must be a mapping of values" in capsys.readouterr().err


def test_an_app_without_actors_is_refused(tmp_path, capsys):
    (tmp_path / "empty.py").write_text("X = 1\n", encoding="utf-8")

    code = asya_main(["render", str(tmp_path / "empty.py"), "--image", IMAGE])

    assert code == 2
    assert "no @actor found" in capsys.readouterr().err
