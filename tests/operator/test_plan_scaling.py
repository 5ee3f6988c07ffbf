"""plan_scaled_object and plan_trigger_authentication: KEDA scales each actor on its queue."""

from __future__ import annotations

from asya_operator.plans.scaling import plan_scaled_object, plan_trigger_authentication

from tests.operator.cr_validation import schema_errors
from tests.operator.plan_builders import async_actor, keda_schema

OWNER = {
    "apiVersion": "asya.sh/v1alpha1",
    "kind": "AsyncActor",
    "name": "score",
    "uid": "uid-score",
    "controller": True,
    "blockOwnerDeletion": True,
}


def test_the_scaled_object_targets_the_actors_scale_subresource_and_reads_its_queue_over_http():
    actor = async_actor(
        "score",
        uid="uid-score",
        scaling={
            "minReplicas": 0,
            "maxReplicas": 8,
            "queueLength": 10,
            "activationQueueLength": 2,
            "pollingInterval": 15,
            "cooldownPeriod": 120,
        },
    )

    planned = plan_scaled_object(actor, "team-a")

    assert planned["apiVersion"] == "keda.sh/v1alpha1"
    assert planned["kind"] == "ScaledObject"
    assert planned["metadata"]["name"] == "score"
    assert planned["metadata"]["namespace"] == "team-a"
    assert planned["metadata"]["ownerReferences"] == [OWNER]
    assert planned["spec"] == {
        "scaleTargetRef": {"apiVersion": "asya.sh/v1alpha1", "kind": "AsyncActor", "name": "score"},
        "pollingInterval": 15,
        "cooldownPeriod": 120,
        "minReplicaCount": 0,
        "maxReplicaCount": 8,
        "triggers": [
            {
                "type": "rabbitmq",
                "metadata": {
                    "protocol": "http",
                    "mode": "QueueLength",
                    "value": "10",
                    "activationValue": "2",
                    "queueName": "asya.team-a.score",
                },
                "authenticationRef": {"name": "score"},
            }
        ],
    }


def test_a_scaled_object_without_scaling_gets_asyas_defaults():
    planned = plan_scaled_object(async_actor("score"), "default")

    spec = planned["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (0, 10)
    assert (spec["pollingInterval"], spec["cooldownPeriod"]) == (30, 300)
    assert spec["triggers"][0]["metadata"]["value"] == "5"
    assert spec["triggers"][0]["metadata"]["activationValue"] == "0"


def test_the_trigger_authentication_gives_keda_the_management_url_as_host_from_the_secret():
    actor = async_actor("score", uid="uid-score", broker={"secretName": "rabbit"})

    planned = plan_trigger_authentication(actor, "team-a")

    assert planned["apiVersion"] == "keda.sh/v1alpha1"
    assert planned["kind"] == "TriggerAuthentication"
    assert planned["metadata"]["name"] == "score"
    assert planned["metadata"]["ownerReferences"] == [OWNER]
    assert planned["spec"] == {
        "secretTargetRef": [{"parameter": "host", "name": "rabbit", "key": "management-url"}]
    }


def test_pause_fallback_and_behavior_reach_the_scaled_object_as_keda_takes_them():
    behavior = {
        "scaleUp": {"policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}]},
        "scaleDown": {"stabilizationWindowSeconds": 600, "selectPolicy": "Min"},
    }
    actor = async_actor(
        "score",
        scaling={
            "maxReplicas": 4,
            "paused": True,
            "fallback": {"failureThreshold": 3, "replicas": 2},
            "behavior": behavior,
        },
    )

    planned = plan_scaled_object(actor, "team-a")

    assert planned["metadata"]["annotations"] == {"autoscaling.keda.sh/paused": "true"}
    assert planned["spec"]["fallback"] == {"failureThreshold": 3, "replicas": 2}
    assert planned["spec"]["advanced"] == {"horizontalPodAutoscalerConfig": {"behavior": behavior}}
    assert schema_errors(planned, keda_schema("ScaledObject")) == []


def test_an_actor_that_sets_none_of_them_gets_no_annotation_fallback_or_advanced():
    planned = plan_scaled_object(async_actor("score", scaling={"paused": False}), "team-a")

    assert "autoscaling.keda.sh/paused" not in planned["metadata"].get("annotations", {})
    assert "fallback" not in planned["spec"]
    assert "advanced" not in planned["spec"]
