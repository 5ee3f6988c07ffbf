"""Every object the operator plans is valid: built-in kinds for Kubernetes (strict), KEDA's
kinds for KEDA's CRD schemas (tests/operator/schemas/)."""

from __future__ import annotations

import kubernetes_validate
import pytest
from asya_operator.config import OperatorConfig
from asya_operator.plans.files import Crs
from asya_operator.plans.objects import plan_objects

from tests.operator.cr_validation import schema_errors, unknown_fields
from tests.operator.plan_builders import KEDA_CRD_FILES, async_actor, keda_schema, resource_flavor

KUBERNETES_VERSIONS = ["1.33.0", kubernetes_validate.latest_version()]
GPU_FLAVOR = resource_flavor(
    "a100",
    nodeLabels={"gpu.example.com/model": "a100"},
    nodeTaints=[
        {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
    ],
    tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
)
ACTORS = [
    ("team-a", async_actor("plain", uid=None)),
    (
        "team-a",
        async_actor(
            "embed",
            uid="uid-embed",
            generation=3,
            flavor="a100",
            replicas=2,
            resources={"cpu": 4, "memory": "16Gi", "gpus": 2},
            env=[
                {"name": "MODEL", "value": "large"},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
            ],
            envFrom=[{"configMapRef": {"name": "app-config"}}],
            scaling={"minReplicas": 1, "maxReplicas": 4, "activationQueueLength": 3},
            broker={"secretName": "asya-broker"},
        ),
    ),
]
PLANNED = [
    item.body
    for item in plan_objects(Crs(actors=ACTORS, flavors={"a100": GPU_FLAVOR}), OperatorConfig())
]
BUILT_IN = [obj for obj in PLANNED if obj["kind"] not in KEDA_CRD_FILES]
KEDA = [obj for obj in PLANNED if obj["kind"] in KEDA_CRD_FILES]


def ids(objects):
    return [f"{obj['kind']}/{obj['metadata']['name']}" for obj in objects]


def test_the_plan_holds_every_kind_the_operator_creates():
    assert sorted(ids(PLANNED)) == [
        "Deployment/embed",
        "Deployment/error-end",
        "Deployment/happy-end",
        "Deployment/plain",
        "ScaledObject/embed",
        "ScaledObject/plain",
        "TriggerAuthentication/embed",
        "TriggerAuthentication/plain",
    ]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("obj", BUILT_IN, ids=ids(BUILT_IN))
def test_each_built_in_object_is_valid_kubernetes_in_strict_mode(obj, version):
    kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("obj", KEDA, ids=ids(KEDA))
def test_each_keda_object_passes_kedas_crd_schema(obj):
    assert schema_errors(obj, keda_schema(obj["kind"])) == []


@pytest.mark.parametrize("obj", KEDA, ids=ids(KEDA))
def test_each_keda_object_has_only_fields_kedas_crd_knows(obj):
    assert unknown_fields(obj, keda_schema(obj["kind"])) == []


def test_the_keda_schema_check_catches_a_trigger_value_that_is_not_a_string():
    (scaled,) = [
        obj for obj in KEDA if obj["metadata"]["name"] == "plain" and "triggers" in obj["spec"]
    ]
    broken = {
        **scaled,
        "spec": {**scaled["spec"], "triggers": [{"type": "rabbitmq", "metadata": {"value": 5}}]},
    }

    assert schema_errors(broken, keda_schema("ScaledObject")) != []


def test_the_strict_check_catches_a_misspelt_field_in_a_deployment():
    broken = {**BUILT_IN[0], "spec": {**BUILT_IN[0]["spec"], "replica": 1}}

    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[-1], strict=True)
