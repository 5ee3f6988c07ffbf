"""Each CEL rule rejects a CR that breaks it, with a message that says what to fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from asya_operator.api.crds import all_crds

from asya.envelope import ACTOR_NAME_MAX_LENGTH
from tests.operator.cr_validation import (
    openapi_schema,
    rejections,
    rules_with_paths,
    unknown_fields,
)

CRDS = {crd["spec"]["names"]["kind"]: crd for crd in all_crds()}

ACTOR: dict[str, Any] = {
    "apiVersion": "asya.sh/v1alpha1",
    "kind": "AsyncActor",
    "metadata": {"name": "score"},
    "spec": {"image": "registry.example.com/app:1", "handler": "app.sentiment:Score"},
}
FLAVOR: dict[str, Any] = {
    "apiVersion": "asya.sh/v1alpha1",
    "kind": "ResourceFlavor",
    "metadata": {"name": "gpu-a100"},
    "spec": {"nodeLabels": {"gpu": "a100"}},
}


def broken(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """`base` with dotted paths set (`spec.scaling.minReplicas=3` as `spec__scaling__...`)."""
    obj = copy.deepcopy(base)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = obj
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return obj


# (what is broken, the CR, the words of the message that says what to fix)
BROKEN_BY_CEL = [
    ("an actor name with capitals", broken(ACTOR, metadata__name="Score"), "lowercase letters"),
    (
        "an actor name too long for a queue",
        broken(ACTOR, metadata__name="a" * (ACTOR_NAME_MAX_LENGTH + 1)),
        f"at most {ACTOR_NAME_MAX_LENGTH} characters",
    ),
    ("an empty image", broken(ACTOR, spec__image=""), "spec.image is empty"),
    ("an empty handler", broken(ACTOR, spec__handler=""), "spec.handler is empty"),
    ("a handler without a colon", broken(ACTOR, spec__handler="app.Score"), "module:attr"),
    ("a zero timeout", broken(ACTOR, spec__timeoutSeconds=0), "timeoutSeconds must be above 0"),
    (
        "minReplicas above maxReplicas",
        broken(ACTOR, spec__scaling={"minReplicas": 4, "maxReplicas": 2}),
        "raise maxReplicas or lower minReplicas",
    ),
    (
        "minReplicas above the default maxReplicas",
        broken(ACTOR, spec__scaling={"minReplicas": 11}),
        "raise maxReplicas or lower minReplicas",
    ),
    (
        "fallback replicas above maxReplicas",
        broken(
            ACTOR,
            spec__scaling={"maxReplicas": 2, "fallback": {"failureThreshold": 3, "replicas": 3}},
        ),
        "lower fallback.replicas or raise maxReplicas",
    ),
    (
        "a base delay above the longest",
        broken(ACTOR, spec__retry={"baseDelayMs": 5000, "maxDelayMs": 100}),
        "raise maxDelayMs or lower baseDelayMs",
    ),
    ("jitter above 1", broken(ACTOR, spec__retry={"jitter": 1.5}), "between 0.0 and 1.0"),
    ("jitter below 0", broken(ACTOR, spec__retry={"jitter": -0.1}), "between 0.0 and 1.0"),
    ("a factor below 1", broken(ACTOR, spec__retry={"factor": 0.5}), "at least 1.0"),
    ("an empty batch", broken(ACTOR, spec__batch={"size": 0}), "set it to 1 or more"),
    (
        "a mount naming no volume",
        broken(ACTOR, spec__volumeMounts=[{"name": "dshm", "mountPath": "/dev/shm"}]),
        "spec.volumeMounts names a volume that spec.volumes does not have",
    ),
    (
        "a volume named as the operator's",
        broken(ACTOR, spec__volumes=[{"name": "tmp", "emptyDir": {}}]),
        "spec.volumes: asya-socket and tmp are the operator's volume names",
    ),
    (
        "a mount at the runtime's /tmp",
        broken(
            ACTOR,
            spec__volumes=[{"name": "scratch", "emptyDir": {}}],
            spec__volumeMounts=[{"name": "scratch", "mountPath": "/tmp"}],
        ),
        "mount elsewhere",
    ),
    (
        "a pod label the selector uses",
        broken(ACTOR, spec__podLabels={"team": "ml", "asya.sh/actor": "other"}),
        "spec.podLabels: app.kubernetes.io/name",
    ),
    (
        "a pod label value with a space",
        broken(ACTOR, spec__podLabels={"team": "b c"}),
        "a label's value is at most 63",
    ),
    (
        "a pod label value ending with a dash",
        broken(ACTOR, spec__podLabels={"team": "a" * 62 + "-"}),
        "a label's value is at most 63",
    ),
    (
        "a pod annotation the operator sets",
        broken(ACTOR, spec__podAnnotations={"prometheus.io/port": "9000"}),
        "spec.podAnnotations: prometheus.io/scrape",
    ),
    (
        "an actor's toleration with neither key nor Exists",
        broken(ACTOR, spec__tolerations=[{"operator": "Equal", "value": "x"}]),
        "set operator: Exists, or give a key",
    ),
    (
        "a toleration with neither key nor Exists",
        broken(FLAVOR, spec__tolerations=[{"operator": "Equal", "value": "x"}]),
        "set operator: Exists, or give a key",
    ),
    (
        "tolerationSeconds on a NoSchedule toleration",
        broken(
            FLAVOR,
            spec__tolerations=[{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 30}],
        ),
        "set effect: NoExecute or remove tolerationSeconds",
    ),
    (
        "a value on an Exists toleration",
        broken(FLAVOR, spec__tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]),
        "remove value",
    ),
    (
        "tolerationSeconds on an actor's NoSchedule toleration",
        broken(
            ACTOR,
            spec__tolerations=[{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 30}],
        ),
        "set effect: NoExecute or remove tolerationSeconds",
    ),
    (
        "a value on an actor's Exists toleration",
        broken(ACTOR, spec__tolerations=[{"key": "k", "operator": "Exists", "value": "x"}]),
        "matches any value: remove value",
    ),
]


@pytest.mark.parametrize("base", [ACTOR, FLAVOR], ids=["AsyncActor", "ResourceFlavor"])
def test_the_unbroken_crs_are_accepted(base):
    assert rejections(base, CRDS[base["kind"]]) == []


@pytest.mark.parametrize(
    ("cr", "fix"), [row[1:] for row in BROKEN_BY_CEL], ids=[row[0] for row in BROKEN_BY_CEL]
)
def test_a_cr_breaking_a_cel_rule_is_rejected_with_that_rules_message_only(cr, fix):
    found = rejections(cr, CRDS[cr["kind"]])
    assert len(found) == 1, found
    assert fix in found[0]


COVERED_HERE = ("AsyncActor", "ResourceFlavor")
"""The admission kinds' rules are covered in test_admission_cel_rules.py."""


def test_every_cel_rule_in_the_crds_has_a_broken_cr_above_that_it_rejects():
    messages = {
        rule["message"]
        for kind in COVERED_HERE
        for _, rule in rules_with_paths(openapi_schema(CRDS[kind]))
    }
    rejected = {
        message.split(": ", 1)[1]
        for _, cr, _ in BROKEN_BY_CEL
        for message in rejections(cr, CRDS[cr["kind"]])
    }
    assert messages == rejected


BROKEN_BY_SCHEMA = [
    ("no handler", broken(ACTOR, spec={"image": "img"}), "'handler' is a required property"),
    ("negative GPUs", broken(ACTOR, spec__resources={"gpus": -1}), "less than the minimum of 0"),
    ("a malformed quantity", broken(ACTOR, spec__resources={"cpu": "lots"}), "does not match"),
    ("maxReplicas 0", broken(ACTOR, spec__scaling={"maxReplicas": 0}), "less than the minimum"),
    ("a flavor name with capitals", broken(ACTOR, spec__flavor="GPU"), "does not match"),
    ("a batch without a size", broken(ACTOR, spec__batch={"waitMs": 5}), "'size' is a required"),
    (
        "an unknown taint effect",
        broken(FLAVOR, spec__nodeTaints=[{"key": "k", "effect": "Sometimes"}]),
        "is not one of",
    ),
    (
        "an image pull secret named with capitals",
        broken(ACTOR, spec__imagePullSecrets=["RegCred"]),
        "does not match",
    ),
    ("a volume without a name", broken(ACTOR, spec__volumes=[{"emptyDir": {}}]), "'name' is"),
    (
        "a relative mount path",
        broken(ACTOR, spec__volumeMounts=[{"name": "v", "mountPath": "cache"}]),
        "does not match '^/'",
    ),
    (
        "an unknown toleration operator",
        broken(ACTOR, spec__tolerations=[{"operator": "In"}]),
        "is not one of",
    ),
    (
        "a malformed sidecar memory",
        broken(ACTOR, spec__sidecar={"resources": {"limits": {"memory": "lots"}}}),
        "does not match",
    ),
    (
        "more than 8 node labels",
        broken(FLAVOR, spec__nodeLabels={f"l{i}": "v" for i in range(9)}),
        "too many properties",
    ),
]


@pytest.mark.parametrize(
    ("cr", "why"), [row[1:] for row in BROKEN_BY_SCHEMA], ids=[row[0] for row in BROKEN_BY_SCHEMA]
)
def test_a_cr_breaking_the_schema_is_rejected_naming_the_field(cr, why):
    found = rejections(cr, CRDS[cr["kind"]])
    assert any(why in message for message in found), found


POD_FIELDS = {
    "imagePullSecrets": ["regcred"],
    "serviceAccountName": "trainer",
    "runtimeClassName": "nvidia",
    "priorityClassName": "high-gpu",
    # The /dev/shm recipe of docs/kubernetes.md, and a source the schema does not spell out.
    "volumes": [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
        {"name": "weights", "persistentVolumeClaim": {"claimName": "llama"}},
    ],
    "volumeMounts": [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "weights", "mountPath": "/models", "readOnly": True, "subPath": "llama-3"},
    ],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        },
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "score"}},
                    },
                }
            ]
        },
    },
    "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
    "nodeSelector": {"disk": "nvme"},
    "podLabels": {"team": "ml", "app.kubernetes.io/version": "3"},
    "podAnnotations": {"example.com/owner": "ml-platform"},
    "sidecar": {"resources": {"requests": {"cpu": "100m", "memory": "1Gi"}}},
}


def test_an_actor_with_every_pod_field_is_accepted_and_keeps_a_volumes_source():
    from asya.crd_rules import apply_defaults

    cr = broken(ACTOR, **{f"spec__{key}": value for key, value in POD_FIELDS.items()})

    assert rejections(cr, CRDS["AsyncActor"]) == []
    kept = apply_defaults(cr, openapi_schema(CRDS["AsyncActor"]))["spec"]
    assert kept["volumes"] == POD_FIELDS["volumes"]
    assert unknown_fields(cr, openapi_schema(CRDS["AsyncActor"])) == []


def test_a_misspelt_volume_source_is_a_field_the_crd_does_not_know():
    cr = broken(ACTOR, spec__volumes=[{"name": "dshm", "emptyDirr": {"medium": "Memory"}}])

    assert unknown_fields(cr, openapi_schema(CRDS["AsyncActor"])) == ["spec.volumes[0].emptyDirr"]


def test_an_integer_quantity_is_accepted_as_kubernetes_accepts_it():
    assert (
        rejections(broken(ACTOR, spec__resources={"cpu": 2, "memory": "1Gi"}), CRDS["AsyncActor"])
        == []
    )
