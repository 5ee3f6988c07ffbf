"""plan_scaled_object and plan_trigger_authentication: KEDA scales each actor on its queue."""

from __future__ import annotations

from asya_operator.plans.scaling import plan_scaled_object, plan_trigger_authentication

from tests.operator.plan_builders import async_actor

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
