"""`asya render` writes only what the cluster takes: an actor whose decorator the AsyncActor CRD
would refuse is refused by render (exit 2, naming the actor, the field and the fix), and every
actor render writes is accepted by the operator's own check of a submitted CR (the CRD's
schema, unknown fields and CEL rules, `asya_operator.api.decoding.decode_submitted`). asya never
imports the operator; this test holds the two to one verdict. An overlay's values are checked
after Helm, by `asya-operator plan`."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
import yaml
from asya_operator import cli as operator_cli
from asya_operator.api.actor import AsyncActor
from asya_operator.api.decoding import StoredSpecError, decode_submitted

from asya.actor import build_spec
from asya.cli import main as asya_main
from asya.manifests import RenderError, actor_entry, render_values
from asya.retry import RetryPolicy
from tests.charts.chart_checks import PIPELINE_CHART, rendered

IMAGE = "registry.example.com/app:1"


def handler(payload):
    return payload


# (what the decorator says, its options): each accepted by @actor itself.
DECORATED = [
    ("asya's defaults", {}),
    (
        "every option at its lowest",
        {
            "min_replicas": 0,
            "max_replicas": 1,
            "queue_length": 1,
            "activation": 0,
            "cooldown_s": 0,
            "polling_interval_s": 0.2,
            "timeout_s": 0.001,
            "concurrency": 1,
            "batch": 1,
            "batch_wait_ms": 0,
            "gpus": 0,
            "priority": -5,
        },
    ),
    ("minReplicas equal to maxReplicas", {"min_replicas": 4, "max_replicas": 4}),
    ("fractional quantities", {"cpu": "0.5", "memory": "1.5Gi", "gpus": 2}),
    ("a pool named as Kubernetes names objects", {"pool": "team-a.gpu"}),
    ("a pool name with capitals", {"pool": "Team_A"}),
    ("an empty pool name", {"pool": ""}),
    ("a pool name too long for an object", {"pool": "p" * 254}),
    ("a retry at its edges", {"retry": RetryPolicy(factor=1.0, jitter=1.0, base_delay_ms=0)}),
    (
        "a base delay equal to the longest",
        {"retry": RetryPolicy(base_delay_ms=500, max_delay_ms=500)},
    ),
    (
        "a base delay above the longest",
        {"retry": RetryPolicy(base_delay_ms=5000, max_delay_ms=100)},
    ),
    ("no retry", {"retry": RetryPolicy(max_attempts=1, jitter=0.0)}),
]


def cluster_takes(entry: dict[str, Any]) -> bool:
    """Whether the API server would take the AsyncActor the chart makes of `entry`."""
    body = {
        "apiVersion": "asya.sh/v1alpha1",
        "kind": "AsyncActor",
        "metadata": {"name": "work"},
        "spec": {"image": IMAGE, **entry},
    }
    try:
        decode_submitted(body, AsyncActor)
    except StoredSpecError:
        return False
    return True


@pytest.mark.parametrize(
    "options", [row[1] for row in DECORATED], ids=[row[0] for row in DECORATED]
)
def test_render_refuses_a_decorated_actor_exactly_when_the_crd_would_refuse_its_entry(options):
    spec = build_spec(handler, {"name": "work", **options})
    entry, _ = actor_entry(spec)

    try:
        render_values([spec], image=IMAGE)
    except RenderError:
        refused = True
    else:
        refused = False

    assert refused == (not cluster_takes(entry))


def app_file(tmp_path, name: str, decorator: str):
    path = tmp_path / f"{name}.py"
    path.write_text(
        textwrap.dedent(
            f"""\
            from asya import actor
            from asya.retry import RetryPolicy

            @actor({decorator})
            def work(payload):
                return payload
            """
        ),
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    ("decorator", "words"),
    [
        (
            "retry=RetryPolicy(base_delay_ms=5000, max_delay_ms=100)",
            ["work", "retry.baseDelayMs", "raise max_delay_ms or lower base_delay_ms"],
        ),
        ("pool='Team_A'", ["work", "pool 'Team_A'", "lowercase letters"]),
        ("min_replicas=5, max_replicas=2", ["'work'", "min_replicas (5) is above max_replicas"]),
    ],
    ids=["base-delay-above-max", "pool-name", "min-above-max"],
)
def test_render_exits_2_naming_the_actor_the_field_and_the_fix(tmp_path, capsys, decorator, words):
    app = app_file(tmp_path, f"app_{abs(hash(decorator))}", decorator)

    code = asya_main(["render", str(app), "--image", IMAGE])
    out, err = capsys.readouterr()

    assert (code, out) == (2, "")
    for word in words:
        assert word in err, err


def test_an_overlay_breaking_a_cel_rule_passes_helm_and_is_refused_by_plan(tmp_path, capsys):
    # Helm's values schema has no CEL rules (Helm cannot run them): plan has them.
    values = {
        "image": IMAGE,
        "actors": {
            "work": {"handler": "app:work", "scaling": {"minReplicas": 5, "maxReplicas": 2}}
        },
    }
    crs = tmp_path / "crs.yaml"
    crs.write_text(yaml.safe_dump_all(rendered(PIPELINE_CHART, values)), encoding="utf-8")

    code = operator_cli.main(["plan", str(crs)])

    assert code == 2
    assert "raise maxReplicas or lower minReplicas" in capsys.readouterr().err
