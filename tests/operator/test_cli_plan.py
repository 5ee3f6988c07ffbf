"""`asya-operator plan FILE.yaml...`: offline, every object the operator would create, as YAML."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from asya_operator.cli import main

from tests.operator.cr_validation import schema_errors
from tests.operator.plan_builders import KEDA_CRD_FILES, keda_schema

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "operator" / "quickstart.yaml"
QUICKSTART_ACTORS = ["normalize", "split", "detect-language", "score", "review"]
ACTOR = """\
apiVersion: asya.sh/v1alpha1
kind: AsyncActor
metadata:
  name: {name}
spec:
  image: registry.example.com/app:1
  handler: app.text:normalize
"""


def plan(capsys, *args):
    code = main(["plan", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, text, name="crs.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_the_quickstart_plans_each_actors_three_objects_then_the_end_actors(capsys):
    code, out, err = plan(capsys, EXAMPLE)

    assert (code, err) == (0, "")
    objects = [(o["kind"], o["metadata"]["name"]) for o in yaml.safe_load_all(out)]
    expected = [
        (kind, name)
        for name in QUICKSTART_ACTORS
        for kind in ("Deployment", "TriggerAuthentication", "ScaledObject")
    ]
    assert objects == [*expected, ("Deployment", "happy-end"), ("Deployment", "error-end")]


def test_every_object_planned_for_the_quickstart_is_valid(capsys):
    _, out, _ = plan(capsys, EXAMPLE)

    for obj in yaml.safe_load_all(out):
        if obj["kind"] in KEDA_CRD_FILES:
            assert schema_errors(obj, keda_schema(obj["kind"])) == [], obj["metadata"]["name"]
        else:
            kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)


def test_each_object_is_preceded_by_a_comment_saying_what_it_is_for(capsys):
    _, out, _ = plan(capsys, EXAMPLE)

    assert "---\n# Deployment default/split, for AsyncActor default/split\n" in out
    assert "---\n# Deployment default/happy-end, for the end actors of namespace default\n" in out


def test_the_sidecar_image_and_the_namespace_are_taken_from_the_options(capsys):
    _, out, _ = plan(
        capsys, EXAMPLE, "--sidecar-image", "registry.example.com/sidecar:2", "--namespace", "nlp"
    )

    objects = list(yaml.safe_load_all(out))
    assert {o["metadata"]["namespace"] for o in objects} == {"nlp"}
    images = {
        c["image"]
        for o in objects
        if o["kind"] == "Deployment"
        for c in o["spec"]["template"]["spec"]["containers"]
        if c["name"] == "sidecar"
    }
    assert images == {"registry.example.com/sidecar:2"}
    queues = [
        o["spec"]["triggers"][0]["metadata"]["queueName"]
        for o in objects
        if o["kind"] == "ScaledObject"
    ]
    assert queues[0] == "asya.nlp.normalize"


def test_a_namespace_in_the_cr_wins_over_the_option_and_each_namespace_gets_end_actors(
    capsys, tmp_path
):
    path = write(
        tmp_path,
        ACTOR.format(name="one").replace("name: one", "name: one\n  namespace: team-b")
        + "---\n"
        + ACTOR.format(name="two"),
    )

    _, out, _ = plan(capsys, path, "--namespace", "team-c")

    objects = [
        (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"])
        for o in yaml.safe_load_all(out)
    ]
    ends = [o for o in objects if o[2] in ("happy-end", "error-end")]
    assert ("ScaledObject", "team-b", "one") in objects
    assert ("ScaledObject", "team-c", "two") in objects
    assert ends == [
        ("Deployment", "team-b", "happy-end"),
        ("Deployment", "team-b", "error-end"),
        ("Deployment", "team-c", "happy-end"),
        ("Deployment", "team-c", "error-end"),
    ]


def test_documents_that_are_not_asya_crs_are_passed_over(capsys, tmp_path):
    path = write(
        tmp_path,
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: asya-broker\n---\n"
        + ACTOR.format(name="one"),
    )

    code, out, _ = plan(capsys, path)

    assert code == 0
    assert [o["kind"] for o in yaml.safe_load_all(out)].count("Secret") == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            ACTOR.format(name="one") + "  scaling:\n    maxReplicas: 0\n",
            "document 1: AsyncActor one cannot be used: Expected `int` >= 1 - at"
            " `$.spec.scaling.maxReplicas`",
        ),
        (
            ACTOR.format(name="one").replace("  handler: app.text:normalize\n", ""),
            "document 1: AsyncActor one cannot be used: Object missing required field `handler` -"
            " at `$.spec`",
        ),
        (
            ACTOR.format(name="one") + "  flavor: a100\n",
            "document 1: AsyncActor/one names flavor a100, which no file defines",
        ),
        (
            ACTOR.format(name="one").replace("kind: AsyncActor", "kind: AsyncActr"),
            "document 1: asya.sh/v1alpha1 AsyncActr is not an asya CR",
        ),
        (
            ACTOR.format(name="Bad_Name"),
            "document 1: AsyncActor Bad_Name breaks its CRD's rules: <root>: metadata.name is the"
            " actor's name",
        ),
        (ACTOR.format(name="happy-end"), "AsyncActor/happy-end: happy-end is an end actor"),
        (
            ACTOR.format(name="one") + "---\n" + ACTOR.format(name="one"),
            "document 2: AsyncActor default/one is already defined in",
        ),
        (
            ACTOR.format(name="one").replace("metadata:\n  name: one\n", "metadata: {}\n"),
            "document 1: AsyncActor without metadata.name",
        ),
        ("spec: [unclosed\n", "not valid YAML"),
        ("- just\n- a list\n", "document 1: not a mapping"),
    ],
    ids=[
        "max-replicas-0",
        "no-handler",
        "unknown-flavor",
        "unknown-kind",
        "bad-name",
        "reserved-name",
        "twice",
        "no-name",
        "not-yaml",
        "not-a-mapping",
    ],
)
def test_a_bad_cr_exits_2_naming_the_file_and_what_is_wrong(capsys, tmp_path, text, message):
    path = write(tmp_path, text, name="bad.yaml")

    code, out, err = plan(capsys, path)

    assert code == 2
    assert out == ""
    assert err.startswith(f"asya-operator plan: {path}")
    assert message in err


def test_a_missing_file_exits_2_naming_it(capsys, tmp_path):
    code, _, err = plan(capsys, tmp_path / "absent.yaml")

    assert code == 2
    missing = tmp_path / "absent.yaml"
    assert err == f"asya-operator plan: {missing}: cannot read it: No such file or directory\n"


def test_an_unknown_command_exits_2_naming_the_commands(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["apply"])

    assert exited.value.code == 2
    assert "invalid choice: 'apply' (choose from 'plan', 'run')" in capsys.readouterr().err


def test_the_command_runs_as_a_program_and_prints_yaml(tmp_path):
    path = write(tmp_path, ACTOR.format(name="one"))

    done = subprocess.run(
        [sys.executable, "-m", "asya_operator.cli", "plan", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert [o["kind"] for o in yaml.safe_load_all(done.stdout)] == [
        "Deployment",
        "TriggerAuthentication",
        "ScaledObject",
        "Deployment",
        "Deployment",
    ]


GROUP_OF = """\
apiVersion: asya.sh/v1alpha1
kind: ActorGroup
metadata:
  name: {name}
spec:
  members:
    - {{name: {member}, replicas: 1, template: {{image: img, handler: 'ml.ddp:worker'}}}}
"""


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        (
            GROUP_OF.format(name="a", member="b-c"),
            GROUP_OF.format(name="a-b", member="c"),
            "document 2: ActorGroup default/a-b would be Degraded (NameTaken), applied after"
            " {path}: document 1: member c runs as actor a-b-c, which ActorGroup default/a (its"
            " member b-c) already runs as",
        ),
        (
            GROUP_OF.format(name="a", member="b-c"),
            ACTOR.format(name="a-b-c"),
            "document 2: AsyncActor default/a-b-c would be Degraded (NameTaken), applied after"
            " {path}: document 1: actor a-b-c is what ActorGroup default/a (its member b-c)"
            " already runs as",
        ),
        (
            ACTOR.format(name="a-b-c"),
            GROUP_OF.format(name="a", member="b-c"),
            "document 2: ActorGroup default/a would be Degraded (NameTaken), applied after"
            " {path}: document 1: member b-c runs as actor a-b-c, which AsyncActor"
            " default/a-b-c already runs as",
        ),
    ],
    ids=["group-after-group", "actor-after-group", "group-after-actor"],
)
def test_two_objects_running_as_one_actor_name_exit_2_naming_both(
    capsys, tmp_path, first, second, message
):
    path = write(tmp_path, first + "---\n" + second)

    code, out, err = plan(capsys, path)

    assert (code, out) == (2, "")
    assert message.format(path=path) in err


def test_a_group_refused_one_name_is_told_of_the_document_before_it_not_one_after(capsys, tmp_path):
    # Member d is listed first, and a-d (document 3) keeps its name only because the group
    # was refused a-b-c, which document 1 runs as.
    group = GROUP_OF.format(name="a", member="d").rstrip("\n") + (
        "\n    - {name: b-c, replicas: 1, template: {image: img, handler: 'ml.ddp:worker'}}\n"
    )
    path = write(
        tmp_path, "---\n".join([ACTOR.format(name="a-b-c"), group, ACTOR.format(name="a-d")])
    )

    code, _out, err = plan(capsys, path)

    assert code == 2
    assert (
        f"document 2: ActorGroup default/a would be Degraded (NameTaken), applied after {path}:"
        " document 1: member b-c runs as actor a-b-c, which AsyncActor default/a-b-c already"
        " runs as"
    ) in err
