"""`asya-operator plan` refuses what the API server would refuse on `kubectl apply`: fields the
CRD does not know, the schema's types and bounds, and the CEL rules; it exits 2 naming the
object, the field and the fix, and plans nothing."""

from __future__ import annotations

import textwrap

import pytest
import yaml
from asya_operator.cli import main

ACTOR = """\
apiVersion: asya.sh/v1alpha1
kind: AsyncActor
metadata:
  name: score
spec:
  image: registry.example.com/app:1
  handler: app.text:score
"""

MEMBER = "    - {name: worker, replicas: 1, template: {image: img, handler: 'ml.ddp:worker'}}\n"
GROUP = (
    """\
apiVersion: asya.sh/v1alpha1
kind: ActorGroup
metadata:
  name: ddp
spec:
  members:
"""
    + MEMBER
    + MEMBER
)

POOL = """\
apiVersion: asya.sh/v1alpha1
kind: ResourcePool
metadata:
  name: {name}
spec: {{}}
"""


def plan_file(capsys, tmp_path, text):
    path = tmp_path / "crs.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    code = main(["plan", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            ACTOR + "  scaling:\n    minReplicas: 5\n    maxReplicas: 2\n",
            [
                "AsyncActor score",
                "spec.scaling",
                "scaling.minReplicas must not be above scaling.maxReplicas",
                "raise maxReplicas or lower minReplicas",
            ],
        ),
        (
            ACTOR.replace("app.text:score", "app.text.score"),
            [
                "AsyncActor score",
                "spec.handler must look like module:attr",
                "my_app.text:normalize",
            ],
        ),
        (
            ACTOR + "  scalling:\n    maxReplicas: 4\n",
            [
                "AsyncActor score",
                "spec.scalling (did you mean spec.scaling?)",
                "correct or remove it",
            ],
        ),
        (
            ACTOR + "  scaling:\n    maxReplica: 4\n",
            ["spec.scaling.maxReplica (did you mean spec.scaling.maxReplicas?)"],
        ),
        (
            ACTOR.replace("  name: score\n", "  name: score\n  namespce: team-a\n"),
            ["metadata.namespce (did you mean metadata.namespace?)"],
        ),
        (
            ACTOR + "  env:\n    - {name: MODEL, vaule: large}\n",
            ["spec.env[0].vaule (did you mean spec.env[0].value?)"],
        ),
        (
            ACTOR.replace("kind: AsyncActor\n", "kind: AsyncActor\nspecs: {}\n"),
            ["AsyncActor score", "specs (did you mean spec?)"],
        ),
        (
            ACTOR + "  env:\n    - {name: MODEL, value: a}\n    - {name: MODEL, value: b}\n",
            [
                "AsyncActor score",
                "spec.env[1]: name 'MODEL' is already in spec.env",
                "keyed by name",
            ],
        ),
        (
            GROUP,
            ["ActorGroup ddp", "spec.members[1]: name 'worker' is already in spec.members"],
        ),
        (
            POOL.format(name="Team_A"),
            ["ResourcePool Team_A", "metadata.name 'Team_A' is not a Kubernetes object name"],
        ),
        (
            ACTOR.replace("  name: score\n", "  name: score\n  namespace: Team_A\n"),
            ["AsyncActor score", "metadata.namespace 'Team_A' is not a namespace name"],
        ),
        (
            ACTOR + "  affinity:\n    nodeAffinty: {}\n",
            [
                "AsyncActor score",
                "spec.affinity.nodeAffinty (did you mean spec.affinity.nodeAffinity?)",
            ],
        ),
        (
            ACTOR
            + "  affinity:\n    nodeAffinity:\n"
            + "      requiredDuringSchedulingIgnoredDuringExecution:\n"
            + "        nodeSelectorTerms:\n          - matchExpressions:\n"
            + "              - {key: gpu, operator: Is, values: [h100]}\n",
            ["AsyncActor score", "operator", "Is"],
        ),
        (
            ACTOR
            + "  volumes:\n    - {name: shm, emptyDir: {medum: Memory}}\n"
            + "  volumeMounts:\n    - {name: shm, mountPath: /dev/shm}\n",
            ["spec.volumes[0].emptyDir.medum (did you mean spec.volumes[0].emptyDir.medium?)"],
        ),
        (
            ACTOR + "  volumes:\n    - {name: shm, emptyDir: {medium: Memory, sizeLimit: 1GB}}\n",
            ["AsyncActor score", "sizeLimit"],
        ),
        (
            GROUP.replace(
                "replicas: 1, template: {",
                "replicas: 1, template: {affinity: {podAfinity: {}}, ",
                1,
            ),
            ["ActorGroup ddp", "podAfinity (did you mean", "podAffinity"],
        ),
    ],
    ids=[
        "min-above-max",
        "handler-without-colon",
        "unknown-spec-field",
        "unknown-nested-field",
        "unknown-metadata-field",
        "unknown-field-in-a-list-item",
        "unknown-top-level-field",
        "an-env-variable-twice",
        "a-group-member-twice",
        "an-object-name-with-capitals",
        "a-namespace-name-with-capitals",
        "a-misspelt-affinity",
        "a-node-selector-operator-core-does-not-have",
        "a-misspelt-empty-dir-field",
        "an-empty-dir-size-that-is-no-quantity",
        "a-misspelt-affinity-in-a-group-member",
    ],
)
def test_a_cr_the_api_server_would_refuse_exits_2_naming_the_object_the_field_and_the_fix(
    capsys, tmp_path, text, words
):
    code, out, err = plan_file(capsys, tmp_path, text)

    assert (code, out) == (2, "")
    assert err.startswith("asya-operator plan: ")
    for word in words:
        assert word in err, err


def test_every_unknown_field_is_named_at_once(capsys, tmp_path):
    code, _, err = plan_file(capsys, tmp_path, ACTOR + "  scalling: {}\n  resources:\n    gpu: 1\n")

    assert code == 2
    assert "spec.scalling" in err
    assert "spec.resources.gpu (did you mean spec.resources.gpus?)" in err


def test_fields_inside_a_free_form_object_are_kept_as_the_crd_keeps_them(capsys, tmp_path):
    code, out, err = plan_file(
        capsys,
        tmp_path,
        ACTOR + "  envFrom:\n    - configMapRef: {name: app-config}\n      anything: [1, 2]\n",
    )

    assert (code, err) == (0, "")
    assert "ScaledObject" in [o["kind"] for o in yaml.safe_load_all(out)]


def test_a_field_left_empty_is_taken_as_absent_as_the_api_server_drops_its_null(capsys, tmp_path):
    # `priority:` with nothing after it is YAML's null: the API server prunes it, then defaults.
    code, out, err = plan_file(capsys, tmp_path, ACTOR + "  priority:\n  scaling:\n")

    assert (code, err) == (0, "")
    (scaled,) = [o for o in yaml.safe_load_all(out) if o["kind"] == "ScaledObject"]
    assert scaled["spec"]["maxReplicaCount"] == 10


_HOSTS = ", ".join(f"node-{i}" for i in range(300))


@pytest.mark.parametrize(
    "text",
    [
        ACTOR + "  volumes:\n    - {name: pages, emptyDir: {medium: HugePages-2Mi}}\n",
        ACTOR + "  volumes:\n    - {name: pages, emptyDir: {medium: HugePages}}\n",
        ACTOR + "  volumes:\n    - {name: scratch, emptyDir: {medium: ''}}\n",
        ACTOR
        + "  affinity:\n    nodeAffinity:\n"
        + "      requiredDuringSchedulingIgnoredDuringExecution:\n"
        + "        nodeSelectorTerms:\n          - matchExpressions:\n"
        + f"              - {{key: kubernetes.io/hostname, operator: In, values: [{_HOSTS}]}}\n",
    ],
    ids=["huge-pages-of-a-size", "huge-pages", "the-node-disk", "three-hundred-hosts"],
)
def test_what_core_takes_in_a_typed_field_is_taken(capsys, tmp_path, text):
    code, out, err = plan_file(capsys, tmp_path, text)

    assert (code, err) == (0, "")
    (deployment,) = [
        o
        for o in yaml.safe_load_all(out)
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "score"
    ]
    assert deployment["spec"]["template"]["spec"]


def test_an_empty_affinity_adds_nothing_to_the_pod(capsys, tmp_path):
    code, out, _ = plan_file(capsys, tmp_path, ACTOR + "  affinity: {}\n")

    (deployment,) = [
        o
        for o in yaml.safe_load_all(out)
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "score"
    ]
    assert code == 0
    assert "affinity" not in deployment["spec"]["template"]["spec"]
