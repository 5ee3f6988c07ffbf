"""`asya render` writes only what the cluster takes: an actor whose decorator the AsyncActor CRD
would refuse is refused by render (exit 2, naming the actor, the field and the fix), and every
actor render writes is accepted by the operator's own check of a submitted CR (the CRD's
schema, unknown fields and CEL rules, `asya_operator.api.decoding.decode_submitted`). An
overlay's values are checked by render too, with the CRD's schema and rules as the operator
generates them into the asya package (asya never imports the operator); these tests hold the
two checks to one verdict on every CEL rule's broken and unbroken examples, and render's copy
of the chart's actor template to what Helm renders."""

from __future__ import annotations

import copy
import json
import textwrap
from importlib import resources
from typing import Any

import pytest
import yaml
from asya_operator import cli as operator_cli
from asya_operator.api.actor import AsyncActor
from asya_operator.api.decoding import StoredSpecError, decode_submitted

from asya.actor import build_spec
from asya.cli import main as asya_main
from asya.cli.render import CRD_SCHEMA
from asya.manifests import (
    RenderError,
    actor_entry,
    actor_specs,
    cluster_problems,
    merge_overlay,
    render_values,
)
from asya.retry import RetryPolicy
from tests.charts.chart_checks import PIPELINE_CHART, rendered
from tests.operator.test_cel_rules import ACTOR, BROKEN_BY_CEL, BROKEN_BY_SCHEMA, broken

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


def crd_schema() -> dict[str, Any]:
    """The AsyncActor schema render reads (from the asya package)."""
    return json.loads(resources.files("asya").joinpath(CRD_SCHEMA).read_text("utf-8"))


def as_values(cr: dict[str, Any]) -> dict[str, Any]:
    """An AsyncActor CR as the chart values that make it."""
    return {"actors": {cr["metadata"]["name"]: copy.deepcopy(cr["spec"])}}


def _actors_of(examples, *, words: bool):
    """The AsyncActor examples render can be given (a name and a spec); with `words`, each
    with the words its message must hold (a CEL rule's own message is render's too)."""
    return [
        (what, cr, fix if words else "")
        for what, cr, fix in examples
        if cr["kind"] == "AsyncActor"
        and set(cr) <= {"apiVersion", "kind", "metadata", "spec"}
        and set(cr["metadata"]) == {"name"}
    ]


ACTOR_EXAMPLES = [
    ("unbroken", ACTOR, ""),
    *_actors_of(BROKEN_BY_CEL, words=True),
    *_actors_of(BROKEN_BY_SCHEMA, words=False),
]


@pytest.mark.parametrize(
    ("cr", "words"), [row[1:] for row in ACTOR_EXAMPLES], ids=[row[0] for row in ACTOR_EXAMPLES]
)
def test_render_and_the_operator_give_one_verdict_on_every_example_of_the_crds_rules(cr, words):
    problems = cluster_problems(as_values(cr), crd_schema())
    try:
        decode_submitted(cr, AsyncActor)
    except StoredSpecError:
        operator_takes = False
    else:
        operator_takes = True

    assert (problems == []) == operator_takes, problems
    assert all(word in "; ".join(problems) for word in words.split("|") if word), problems


def test_every_cel_rule_of_the_asyncactor_crd_has_an_example_render_checks():
    schema = crd_schema()
    messages = set(_rule_messages(schema))
    refused = {
        problem.split(": ", 1)[1]
        for _, cr, _ in ACTOR_EXAMPLES
        for problem in cluster_problems(as_values(cr), schema)
    }

    assert messages <= refused, messages - refused


def _rule_messages(schema: dict[str, Any]) -> list[str]:
    found = [rule["message"] for rule in schema.get("x-kubernetes-validations", [])]
    for sub in schema.get("properties", {}).values():
        found += _rule_messages(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            found += _rule_messages(schema[key])
    return found


OVERLAYS = [
    (
        "an unknown field",
        {"actors": {"work": {"scalling": {"minReplicas": 1}}}},
        ["actors.work.scalling", "did you mean actors.work.scaling?", "no such field"],
    ),
    (
        "minReplicas above maxReplicas",
        {"actors": {"work": {"scaling": {"minReplicas": 5, "maxReplicas": 2}}}},
        ["actors.work.scaling", "raise maxReplicas or lower minReplicas"],
    ),
    (
        "a handler without a colon",
        {"actors": {"work": {"handler": "app.work"}}},
        ["actors.work", "spec.handler must look like module:attr"],
    ),
    (
        "a wrong type and a bound",
        {"actors": {"work": {"concurrency": "two", "scaling": {"queueLength": 0}}}},
        ["actors.work.concurrency: 'two' is not of type 'integer'", "scaling.queueLength"],
    ),
    (
        "an actor name the cluster refuses",
        {"actors": {"Work_2": {"handler": "app:work"}}},
        ["actors.Work_2", "metadata.name is the actor's name: lowercase letters"],
    ),
    (
        "defaults that break a rule",
        {"actorDefaults": {"timeoutSeconds": 0}},
        ["actors.work", "timeoutSeconds must be above 0"],
    ),
    ("actors as a list", {"actors": [1, 2]}, ["actors: must be a mapping, got a list"]),
    ("an actor as a number", {"actors": {"x": 5}}, ["actors.x: must be a mapping of fields"]),
    ("defaults as a string", {"actorDefaults": "s"}, ["actorDefaults: must be a mapping"]),
    ("the broker as a string", {"broker": "s"}, ["broker: must be a mapping"]),
    (
        "an actor's broker as a string",
        {"actors": {"work": {"broker": "s"}}},
        ["actors.work.broker: must be a mapping"],
    ),
    ("an actor name that is no string", {"actors": {1: {"handler": "a:b"}}}, ["the key 1"]),
    (
        "an integer beyond 64 bits",
        {"actors": {"work": {"scaling": {"maxReplicas": 10**20}}}},
        ["actors.work.scaling.maxReplicas"],
    ),
    (
        "a whole float for an integer",
        {"actors": {"work": {"concurrency": 2.0}}},
        ["actors.work.concurrency: 2.0 is not of type 'integer'"],
    ),
]


@pytest.mark.parametrize(
    ("overlay", "words"), [row[1:] for row in OVERLAYS], ids=[row[0] for row in OVERLAYS]
)
def test_render_exits_2_on_an_overlay_the_cluster_would_refuse_naming_the_field(
    tmp_path, capsys, overlay, words
):
    app = app_file(tmp_path, "app_overlay", "name='work'")
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(overlay), encoding="utf-8")

    code = asya_main(["render", str(app), "--image", IMAGE, "--values-overlay", str(path)])
    out, err = capsys.readouterr()

    assert (code, out) == (2, "")
    assert "the cluster would refuse these AsyncActors" in err
    assert f"--values-overlay {path}" in err
    for word in words:
        assert word in err, err


VALUES_FOR_THE_TEMPLATE = [
    {"image": IMAGE, "actors": {"a": {"handler": "app:a"}}},
    {
        "image": IMAGE,
        "broker": {"secretName": "amqp"},
        "actorDefaults": {"scaling": {"maxReplicas": 3, "queueLength": 7}, "timeoutSeconds": 9},
        "actors": {
            "a": {"handler": "app:a", "scaling": {"maxReplicas": 5}},
            "b": {"handler": "app:b", "image": "other:2", "broker": {"secretName": "own"}},
        },
    },
]


@pytest.mark.parametrize("values", VALUES_FOR_THE_TEMPLATE, ids=["bare", "defaults-and-own"])
def test_render_makes_each_actors_spec_as_the_charts_template_does(values):
    made = {
        obj["metadata"]["name"]: obj["spec"]
        for obj in rendered(PIPELINE_CHART, values)
        if obj["kind"] == "AsyncActor"
    }
    chart_defaults = yaml.safe_load((PIPELINE_CHART / "values.yaml").read_text(encoding="utf-8"))

    assert actor_specs(merge_overlay(chart_defaults, values)) == made


def test_an_integer_beyond_64_bits_is_refused_by_render_and_by_the_operator_without_a_crash():
    cr = broken(ACTOR, spec__scaling={"maxReplicas": 10**20})

    with pytest.raises(StoredSpecError, match="integer beyond 64 bits"):
        decode_submitted(cr, AsyncActor)
    assert cluster_problems(as_values(cr), crd_schema()) != []


def test_an_overlays_namespace_is_checked_as_the_namespace_option_is(tmp_path, capsys):
    app = app_file(tmp_path, "app_namespace", "name='work'")
    path = tmp_path / "overlay.yaml"
    path.write_text("namespace: Bad_NS\n", encoding="utf-8")

    code = asya_main(["render", str(app), "--image", IMAGE, "--values-overlay", str(path)])
    out, err = capsys.readouterr()

    assert (code, out) == (2, "")
    assert "namespace 'Bad_NS' (from --values-overlay) is not a Kubernetes namespace name" in err
