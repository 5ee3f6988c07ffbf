"""plan_end_actors: a namespace's happy-end and error-end, owned by every actor in it."""

from __future__ import annotations

import pytest
from asya_operator.config import OperatorConfig
from asya_operator.plans.actor_objects import plan_end_actors

from tests.operator.plan_builders import async_actor

CONFIG = OperatorConfig(sidecar_image="registry.example.com/asya-sidecar:9.9")


def test_a_namespace_without_actors_has_no_end_actors():
    assert plan_end_actors("team-a", [], CONFIG) == []


def test_each_end_actor_is_one_sidecar_serving_itself_without_a_runtime():
    planned = plan_end_actors("team-a", [async_actor()], CONFIG)

    assert [d["metadata"]["name"] for d in planned] == ["happy-end", "error-end"]
    for obj in planned:
        (sidecar,) = obj["spec"]["template"]["spec"]["containers"]
        assert sidecar["name"] == "sidecar"
        assert sidecar["image"] == "registry.example.com/asya-sidecar:9.9"
        assert sidecar["env"] == [
            {"name": "ASYA_ACTOR", "value": obj["metadata"]["name"]},
            {"name": "ASYA_NAMESPACE", "value": "team-a"},
            {"name": "ASYA_HEALTH_PORT", "value": "8080"},
            {"name": "ASYA_GRACE_S", "value": "30"},
            {
                "name": "ASYA_BROKER_URL",
                "valueFrom": {"secretKeyRef": {"name": "asya-broker", "key": "amqp-url"}},
            },
        ]
        assert "volumes" not in obj["spec"]["template"]["spec"]
        assert obj["spec"]["replicas"] == 1
        assert obj["spec"]["selector"] == {
            "matchLabels": {
                "app.kubernetes.io/component": "end-actor",
                "asya.sh/actor": obj["metadata"]["name"],
            }
        }


def test_every_actor_of_the_namespace_owns_the_end_actors_and_none_controls_them():
    actors = [async_actor("split", uid="uid-split"), async_actor("normalize", uid="uid-norm")]

    happy, _ = plan_end_actors("team-a", actors, CONFIG)

    assert happy["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "asya.sh/v1alpha1",
            "kind": "AsyncActor",
            "name": "normalize",
            "uid": "uid-norm",
            "controller": False,
            "blockOwnerDeletion": False,
        },
        {
            "apiVersion": "asya.sh/v1alpha1",
            "kind": "AsyncActor",
            "name": "split",
            "uid": "uid-split",
            "controller": False,
            "blockOwnerDeletion": False,
        },
    ]


def test_the_end_actors_use_the_broker_secret_the_actors_name():
    actors = [async_actor(broker={"secretName": "rabbit"})]

    _, error = plan_end_actors("team-a", actors, CONFIG)

    (sidecar,) = error["spec"]["template"]["spec"]["containers"]
    assert sidecar["env"][-1]["valueFrom"]["secretKeyRef"] == {"name": "rabbit", "key": "amqp-url"}


def test_actors_of_one_namespace_on_two_brokers_are_refused_naming_both_secrets():
    actors = [
        async_actor("split", broker={"secretName": "rabbit-a"}),
        async_actor("normalize", broker={"secretName": "rabbit-b"}),
    ]

    with pytest.raises(ValueError, match=r"different broker Secrets \(rabbit-a, rabbit-b\)"):
        plan_end_actors("team-a", actors, CONFIG)
