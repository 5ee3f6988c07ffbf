"""The asya-pipeline chart, rendered and linted by real Helm, every object validated."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.charts.chart_checks import (
    NAMESPACE,
    PIPELINE_CHART,
    check_all,
    lint_problems,
    notes,
    of_kind,
    rendered,
    values_error,
)

ACTOR = {"handler": "app.text:normalize"}


def pipeline(**values: Any) -> dict[str, Any]:
    return {"image": "registry.example.com/app:1", **values}


GPU_VALUES = pipeline(
    actors={
        "embed": {
            "handler": "app.models:Embed",
            "flavor": "h100",
            "resources": {"cpu": "4", "memory": "32Gi", "gpus": 1},
            "scaling": {"minReplicas": 0, "maxReplicas": 4, "queueLength": 2},
            "timeoutSeconds": 120.0,
            "batch": {"size": 32, "waitMs": 50},
        }
    },
)

POOL_VALUES = pipeline(
    actors={"embed": {"handler": "ml.embed:Embed", "pool": "team-a", "priority": 5}},
)

GROUP_VALUES = pipeline(
    actorGroups={
        "ddp-train": {
            "pool": "team-a",
            "priority": 10,
            "readinessTimeoutSeconds": 600,
            "members": [
                {
                    "name": "trainer",
                    "replicas": 4,
                    "template": {"handler": "ml.train:trainer", "resources": {"gpus": 1}},
                },
                {
                    "name": "coordinator",
                    "replicas": 1,
                    "template": {"image": "own:2", "handler": "ml.train:coordinator"},
                },
            ],
        }
    },
)

POD_FIELDS = {
    "imagePullSecrets": ["regcred"],
    "serviceAccountName": "trainer",
    "runtimeClassName": "nvidia",
    "priorityClassName": "high-gpu",
    "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}],
    "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["nvme"]}]}
                ]
            }
        }
    },
    "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
    "nodeSelector": {"zone": "a"},
    "podLabels": {"team": "ml"},
    "podAnnotations": {"example.com/owner": "ml-platform"},
    "sidecar": {"resources": {"requests": {"memory": "1Gi"}}},
}
"""Every pod field of an actor template, as a team writes them in values."""

POD_FIELD_VALUES = pipeline(
    actors={"train": {"handler": "ml.train:step", **POD_FIELDS}},
    actorGroups={
        "ddp": {
            "members": [
                {
                    "name": "worker",
                    "replicas": 2,
                    "template": {"handler": "ml.ddp:worker", **POD_FIELDS},
                }
            ]
        }
    },
)

VALUE_SETS = {
    "defaults": {},
    "one actor": pipeline(actors={"normalize": ACTOR}),
    "a GPU actor with a flavor": GPU_VALUES,
    "an actor in a pool": POOL_VALUES,
    "an actor group": GROUP_VALUES,
    "every pod field": POD_FIELD_VALUES,
    "actor defaults and an own Secret": pipeline(
        actorDefaults={"flavor": "general", "scaling": {"cooldownPeriod": 30}},
        broker={
            "secretName": "team-broker",
            "create": True,
            "amqpUrl": "amqp://u:p@rabbitmq:5672/",
            "managementUrl": "http://u:p@rabbitmq:15672/",
        },
        actors={"normalize": ACTOR, "split": {"handler": "app.text:split", "image": "other:2"}},
    ),
}


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_every_value_set_renders_valid_objects_and_lints_clean(values):
    objects = rendered(PIPELINE_CHART, values)

    check_all(objects)
    assert lint_problems(PIPELINE_CHART, values) == []
    assert len(of_kind(objects, "AsyncActor")) == len(values.get("actors", {}))


def test_an_actor_gets_the_chart_wide_image_and_secret_and_keeps_only_what_it_sets():
    (actor,) = rendered(PIPELINE_CHART, pipeline(actors={"normalize": ACTOR}))

    assert actor["metadata"] == {
        "name": "normalize",
        "namespace": NAMESPACE,
        "labels": actor["metadata"]["labels"],
    }
    assert actor["spec"] == {
        "handler": "app.text:normalize",
        "image": "registry.example.com/app:1",
        "broker": {"secretName": "asya-broker"},
    }


def test_actor_defaults_go_under_each_actor_and_the_actors_own_values_win():
    values = pipeline(
        actorDefaults={"flavor": "general", "scaling": {"cooldownPeriod": 30, "maxReplicas": 3}},
        actors={
            "normalize": ACTOR,
            "split": {"handler": "app.text:split", "scaling": {"maxReplicas": 8}},
        },
    )

    actors = of_kind(rendered(PIPELINE_CHART, values), "AsyncActor")

    assert actors["normalize"]["spec"]["scaling"] == {"cooldownPeriod": 30, "maxReplicas": 3}
    assert actors["split"]["spec"]["scaling"] == {"cooldownPeriod": 30, "maxReplicas": 8}
    assert {a["spec"]["flavor"] for a in actors.values()} == {"general"}


def test_a_gpu_actor_keeps_its_flavor_gpus_and_batching():
    spec = of_kind(rendered(PIPELINE_CHART, GPU_VALUES), "AsyncActor")["embed"]["spec"]

    assert spec["resources"] == {"cpu": "4", "memory": "32Gi", "gpus": 1}
    assert (spec["flavor"], spec["batch"]) == ("h100", {"size": 32, "waitMs": 50})


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_every_object_is_the_teams_own_namespaced_one(values):
    objects = rendered(PIPELINE_CHART, values)

    assert all(obj["metadata"]["namespace"] == NAMESPACE for obj in objects)


# A malformed entry too: the platform chart's schema checks entries, this chart only says
# where they go.
@pytest.mark.parametrize(
    "entries", [{"shared": {}}, {"Shared": {"unknownField": 1}}], ids=["valid", "malformed"]
)
@pytest.mark.parametrize("key", ["flavors", "resourcePools", "cohorts"])
def test_cluster_scoped_objects_are_refused_naming_the_platform_chart(key, entries):
    message = values_error(PIPELINE_CHART, pipeline(**{key: entries}))

    assert f"{key}: ResourceFlavors, ResourcePools and Cohorts are cluster-scoped" in message
    assert "asya-platform chart (charts/asya-platform)" in message


def test_an_actor_groups_members_get_the_chart_wide_image_unless_they_name_one():
    (group,) = of_kind(rendered(PIPELINE_CHART, GROUP_VALUES), "ActorGroup").values()

    images = {m["name"]: m["template"]["image"] for m in group["spec"]["members"]}
    assert images == {"trainer": "registry.example.com/app:1", "coordinator": "own:2"}
    assert group["spec"]["broker"] == {"secretName": "asya-broker"}
    assert group["metadata"]["namespace"] == NAMESPACE


def test_the_namespace_value_places_the_actors_and_the_secret():
    values = pipeline(
        namespace="team-a",
        broker={"secretName": "b", "create": True, "amqpUrl": "amqp://x", "managementUrl": "h"},
        actors={"normalize": ACTOR},
    )

    objects = rendered(PIPELINE_CHART, values)

    assert {obj["metadata"]["namespace"] for obj in objects} == {"team-a"}
    secret = of_kind(objects, "Secret")["b"]
    assert secret["stringData"] == {"amqp-url": "amqp://x", "management-url": "h"}


BAD_VALUES = {
    "a wrong type": (
        pipeline(actors={"normalize": {**ACTOR, "concurrency": "four"}}),
        "/actors/normalize/concurrency",
    ),
    "an unknown actor field": (
        pipeline(actors={"normalize": {**ACTOR, "concurency": 4}}),
        "'concurency' not allowed",
    ),
    "negative replicas": (
        pipeline(actors={"normalize": {**ACTOR, "scaling": {"minReplicas": -1}}}),
        "/actors/normalize/scaling/minReplicas",
    ),
    "an invalid actor name": (pipeline(actors={"Normalize_Text": ACTOR}), "'Normalize_Text'"),
    "an unknown top-level key": (pipeline(actorz={}), "'actorz' not allowed"),
    "a missing handler": (pipeline(actors={"normalize": {"concurrency": 2}}), "'handler'"),
    "a bad quantity": (
        pipeline(actors={"normalize": {**ACTOR, "resources": {"memory": "lots"}}}),
        "/actors/normalize/resources/memory",
    ),
    "no image anywhere": ({"actors": {"normalize": ACTOR}}, "actors.normalize.image"),
    "a member without an image anywhere": (
        {"actorGroups": {"g": {"members": [{"name": "m", "replicas": 1, "template": ACTOR}]}}},
        "actorGroups.g.members[m].template.image",
    ),
    "an unknown member field": (
        pipeline(actorGroups={"g": {"members": [{"name": "m", "replica": 1, "template": ACTOR}]}}),
        "'replica' not allowed",
    ),
    "a pull secret named with capitals": (
        pipeline(actors={"normalize": {**ACTOR, "imagePullSecrets": ["RegCred"]}}),
        "/actors/normalize/imagePullSecrets/0",
    ),
    "a relative mount path": (
        pipeline(
            actors={"normalize": {**ACTOR, "volumeMounts": [{"name": "v", "mountPath": "v"}]}}
        ),
        "/actors/normalize/volumeMounts/0/mountPath",
    ),
    "a mount at the runtime's /tmp": (
        pipeline(
            actors={"normalize": {**ACTOR, "volumeMounts": [{"name": "v", "mountPath": "/tmp"}]}}
        ),
        "/actors/normalize/volumeMounts/0/mountPath",
    ),
    "a volume named as the operator's": (
        pipeline(actors={"normalize": {**ACTOR, "volumes": [{"name": "asya-socket"}]}}),
        "/actors/normalize/volumes/0/name",
    ),
    "a volume without a name": (
        pipeline(actors={"normalize": {**ACTOR, "volumes": [{"emptyDir": {}}]}}),
        "/actors/normalize/volumes/0",
    ),
    "a pod label the selector uses": (
        pipeline(actors={"normalize": {**ACTOR, "podLabels": {"asya.sh/actor": "x"}}}),
        "'asya.sh/actor'",
    ),
    "a pod label value with a space": (
        pipeline(actors={"normalize": {**ACTOR, "podLabels": {"team": "m l"}}}),
        "/actors/normalize/podLabels/team",
    ),
    "a misspelt affinity field": (
        pipeline(actors={"normalize": {**ACTOR, "affinity": {"nodeAffinty": {}}}}),
        "'nodeAffinty' not allowed",
    ),
    "a misspelt emptyDir field": (
        pipeline(
            actors={"normalize": {**ACTOR, "volumes": [{"name": "v", "emptyDir": {"medum": ""}}]}}
        ),
        "'medum' not allowed",
    ),
    "a misspelt volume source": (
        pipeline(actors={"normalize": {**ACTOR, "volumes": [{"name": "v", "emptyDirr": {}}]}}),
        "'emptyDirr' not allowed",
    ),
    "a member's pod annotation the operator sets": (
        pipeline(
            actorGroups={
                "g": {
                    "members": [
                        {
                            "name": "m",
                            "replicas": 1,
                            "template": {**ACTOR, "podAnnotations": {"prometheus.io/port": "1"}},
                        }
                    ]
                }
            }
        ),
        "'prometheus.io/port'",
    ),
    "a bad sidecar memory": (
        pipeline(
            actors={"normalize": {**ACTOR, "sidecar": {"resources": {"limits": {"memory": "x"}}}}}
        ),
        "/actors/normalize/sidecar/resources/limits/memory",
    ),
    "an unknown sidecar field": (
        pipeline(actors={"normalize": {**ACTOR, "sidecar": {"memory": "1Gi"}}}),
        "'memory' not allowed",
    ),
    "a Secret to create without its URL": (
        pipeline(broker={"secretName": "b", "create": True, "managementUrl": "h"}),
        "broker.amqpUrl",
    ),
}


@pytest.mark.parametrize(("values", "named"), BAD_VALUES.values(), ids=BAD_VALUES.keys())
def test_bad_values_are_refused_at_render_naming_the_field(values, named):
    message = values_error(PIPELINE_CHART, copy.deepcopy(values))

    assert named in message


def test_the_notes_name_the_actors_and_how_to_create_the_missing_secret():
    text = notes(PIPELINE_CHART, pipeline(actors={"split": ACTOR, "normalize": ACTOR}))

    assert "AsyncActors in namespace apps: normalize, split." in text
    assert "kubectl create secret generic asya-broker -n apps" in text


def test_every_pod_field_reaches_the_custom_resources_as_written():
    objects = rendered(PIPELINE_CHART, POD_FIELD_VALUES)

    actor = of_kind(objects, "AsyncActor")["train"]["spec"]
    (member,) = of_kind(objects, "ActorGroup")["ddp"]["spec"]["members"]
    for spec in (actor, member["template"]):
        assert {key: spec[key] for key in POD_FIELDS} == POD_FIELDS
