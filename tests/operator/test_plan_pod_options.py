"""The actor template's pod fields (pull secrets, service account, runtime class, priority
class, volumes and mounts, affinity, tolerations, node selector, pod labels and annotations,
the sidecar's resources) and the drain: each reaches an AsyncActor's Deployment and an
ActorGroup member's StatefulSets alike, and the pods stay valid as Kubernetes takes them."""

from __future__ import annotations

import kubernetes_validate
import msgspec
import pytest
from asya_operator.api.group import ActorGroup
from asya_operator.api.template import (
    OPERATOR_ANNOTATIONS,
    OPERATOR_LABELS,
    OPERATOR_MOUNT_PATHS,
    OPERATOR_VOLUMES,
)
from asya_operator.config import OperatorConfig
from asya_operator.plans.actor_objects import plan_deployment
from asya_operator.plans.group_objects import plan_group

from tests.operator.admission_crs import GROUP, changed, member
from tests.operator.plan_builders import async_actor, resource_flavor

CONFIG = OperatorConfig(sidecar_image="registry.example.com/asya-sidecar:9.9")
KUBERNETES_VERSIONS = ["1.33.0", kubernetes_validate.latest_version()]
FLAVOR = resource_flavor(
    "h100",
    nodeLabels={"gpu.example.com/model": "h100", "zone": "a"},
    nodeTaints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
)

SHM = {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}
"""docs/kubernetes.md's /dev/shm recipe: a RAM-backed emptyDir for DataLoader workers and NCCL."""

EVERY_FIELD = {
    "imagePullSecrets": ["regcred", "mirror-cred"],
    "serviceAccountName": "trainer",
    "runtimeClassName": "nvidia",
    "priorityClassName": "high-gpu",
    "volumes": [SHM, {"name": "weights", "persistentVolumeClaim": {"claimName": "llama"}}],
    "volumeMounts": [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "weights", "mountPath": "/models", "readOnly": True, "subPath": "llama-3"},
    ],
    "affinity": {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"team": "ml"}},
                    },
                }
            ]
        }
    },
    "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
    "nodeSelector": {"disk": "nvme"},
    "podLabels": {"team": "ml"},
    "podAnnotations": {"example.com/owner": "ml-platform"},
    "sidecar": {"resources": {"requests": {"cpu": "100m"}}},
}


def actor_pod(flavor=None, config=CONFIG, **spec):
    """The pod template of an AsyncActor's Deployment."""
    actor = async_actor(flavor=flavor.metadata["name"] if flavor else None, **spec)
    return plan_deployment(actor, "team-a", flavor, config)["spec"]["template"]


def statefulset(flavor=None, config=CONFIG, **template):
    body = changed(
        GROUP,
        spec__members=[
            member(template={**GROUP["spec"]["members"][0]["template"], **template}, replicas=2)
        ],
    )
    flavors = {} if flavor is None else {flavor.metadata["name"]: flavor}
    running = {0: {"worker": (None if flavor is None else flavor.metadata["name"], 2)}}
    planned = plan_group(msgspec.convert(body, ActorGroup), "ml-b", running, flavors, config)
    (found,) = [obj for obj in planned if obj["kind"] == "StatefulSet"]
    return found


def member_pod(flavor=None, config=CONFIG, **template):
    """The pod template of an ActorGroup member's StatefulSet."""
    return statefulset(flavor, config, **template)["spec"]["template"]


BOTH = pytest.mark.parametrize("pod_of", [actor_pod, member_pod], ids=["Deployment", "StatefulSet"])


def container(template, name):
    (found,) = [c for c in template["spec"]["containers"] if c["name"] == name]
    return found


@BOTH
def test_the_pod_level_fields_reach_the_pod_as_core_names_them(pod_of):
    spec = pod_of(**EVERY_FIELD)["spec"]

    assert spec["imagePullSecrets"] == [{"name": "regcred"}, {"name": "mirror-cred"}]
    assert spec["serviceAccountName"] == "trainer"
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["priorityClassName"] == "high-gpu"
    assert spec["affinity"] == EVERY_FIELD["affinity"]
    # A service account for workload identity; the API token stays unmounted.
    assert spec["automountServiceAccountToken"] is False


@BOTH
def test_a_template_without_them_leaves_them_to_the_cluster(pod_of):
    spec = pod_of()["spec"]

    for key in (
        "imagePullSecrets",
        "serviceAccountName",
        "runtimeClassName",
        "priorityClassName",
        "affinity",
    ):
        assert key not in spec


@BOTH
def test_the_dev_shm_recipe_mounts_a_memory_backed_volume_in_the_runtime_only(pod_of):
    planned = pod_of(volumes=[SHM], volumeMounts=[{"name": "dshm", "mountPath": "/dev/shm"}])

    assert planned["spec"]["volumes"] == [
        {"name": "asya-socket", "emptyDir": {}},
        {"name": "tmp", "emptyDir": {}},
        SHM,
    ]
    assert container(planned, "runtime")["volumeMounts"] == [
        {"name": "asya-socket", "mountPath": "/var/run/asya"},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    assert container(planned, "sidecar")["volumeMounts"] == [
        {"name": "asya-socket", "mountPath": "/var/run/asya"}
    ]


@BOTH
def test_a_volume_or_mount_taking_the_operators_name_or_path_gives_way_to_the_operators(pod_of):
    # The CRD's CEL rules refuse these; a CR planned from a file may still carry them.
    planned = pod_of(
        volumes=[{"name": "tmp", "hostPath": {"path": "/"}}, SHM],
        volumeMounts=[
            {"name": "tmp", "mountPath": "/scratch"},
            {"name": "dshm", "mountPath": "/tmp"},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
    )

    assert planned["spec"]["volumes"][1] == {"name": "tmp", "emptyDir": {}}
    assert [v["name"] for v in planned["spec"]["volumes"]] == ["asya-socket", "tmp", "dshm"]
    assert container(planned, "runtime")["volumeMounts"][2:] == [
        {"name": "dshm", "mountPath": "/dev/shm"}
    ]


@BOTH
def test_the_node_selector_adds_to_the_flavors_and_the_flavor_wins_a_key_both_set(pod_of):
    spec = pod_of(FLAVOR, nodeSelector={"disk": "nvme", "zone": "b"})["spec"]

    assert spec["nodeSelector"] == {"disk": "nvme", "gpu.example.com/model": "h100", "zone": "a"}


@BOTH
def test_the_templates_tolerations_follow_the_flavors_without_repeating_one(pod_of):
    spot = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

    spec = pod_of(FLAVOR, tolerations=[spot, gpu])["spec"]

    assert spec["tolerations"] == [gpu, spot]


@BOTH
def test_a_template_alone_places_its_pods_without_a_flavor(pod_of):
    spot = {"key": "spot", "operator": "Exists"}

    spec = pod_of(nodeSelector={"disk": "nvme"}, tolerations=[spot])["spec"]

    assert (spec["nodeSelector"], spec["tolerations"]) == ({"disk": "nvme"}, [spot])


@BOTH
def test_pod_labels_and_annotations_are_added_and_the_operators_keys_win(pod_of):
    operators = pod_of()["metadata"]
    # The CRD's CEL rules refuse the operator's keys; a CR planned from a file may carry them.
    metadata = pod_of(
        podLabels={"team": "ml", "asya.sh/actor": "other", "app.kubernetes.io/component": "x"},
        podAnnotations={"example.com/owner": "ml", "prometheus.io/port": "1"},
    )["metadata"]

    assert metadata["labels"] == {"team": "ml", **operators["labels"]}
    assert metadata["annotations"] == {"example.com/owner": "ml", **operators["annotations"]}


def test_the_selectors_still_select_the_pods_whatever_labels_the_template_adds():
    deployment = plan_deployment(
        async_actor(podLabels={"asya.sh/actor": "other"}), "team-a", None, CONFIG
    )
    sts = statefulset(podLabels={"asya.sh/member": "other", "asya.sh/instance": "7"})

    for obj in (deployment, sts):
        selector = obj["spec"]["selector"]["matchLabels"]
        labels = obj["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items()


def test_every_label_annotation_volume_and_mount_the_operator_sets_is_reserved_in_the_crd():
    # The CEL rules refuse the keys, names and paths listed in asya_operator.api.template: they
    # must be every one the plans use.
    for template in (actor_pod(), member_pod()):
        assert set(template["metadata"]["labels"]) <= set(OPERATOR_LABELS)
        assert set(template["metadata"]["annotations"]) <= set(OPERATOR_ANNOTATIONS)
        assert {v["name"] for v in template["spec"]["volumes"]} == set(OPERATOR_VOLUMES)
        mounts = container(template, "runtime")["volumeMounts"]
        assert {m["mountPath"] for m in mounts} == set(OPERATOR_MOUNT_PATHS)
    assert "apps.kubernetes.io/pod-index" in OPERATOR_LABELS  # a StatefulSet's own


MIB = 2**20


@pytest.mark.parametrize(
    ("spec", "memory"),
    [
        # 128Mi + 2 copies x 1 x (2 + 1) x 1 envelopes x (4 MiB + 64 KiB) = 128 + 24.375 MiB
        ({}, "153Mi"),
        # a batch of 16: 48 envelopes in flight, 2 x 48 x 4.0625 MiB = 390 MiB more
        ({"batch": {"size": 16}}, "518Mi"),
        # and two calls at a time: twice the envelopes
        ({"batch": {"size": 16}, "concurrency": 2}, "908Mi"),
    ],
    ids=["one-at-a-time", "batch-of-16", "batch-of-16-twice"],
)
def test_the_sidecars_memory_grows_with_the_envelopes_it_holds_in_flight(spec, memory):
    sidecar = container(actor_pod(**spec), "sidecar")

    assert sidecar["resources"] == {
        "requests": {"cpu": "50m", "memory": memory},
        "limits": {"memory": memory},
    }


def test_the_operators_sidecar_memory_is_the_base_the_envelopes_add_to():
    sidecar = container(actor_pod(config=OperatorConfig(sidecar_memory="1Gi")), "sidecar")

    assert sidecar["resources"]["limits"] == {"memory": f"{1024 + 25}Mi"}


def test_a_batch_of_16_payloads_at_the_limit_fits_in_the_sidecars_default_memory():
    # The sidecar holds concurrency x (2 + pipeline depth) x batch envelopes at most.
    limit = container(actor_pod(batch={"size": 16}), "sidecar")["resources"]["limits"]["memory"]

    held = 1 * (2 + 1) * 16 * (4 * MIB + 64 * 1024)
    assert int(limit.removesuffix("Mi")) * MIB >= 128 * MIB + 2 * held


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            {"requests": {"memory": "2Gi"}},
            {"requests": {"cpu": "50m", "memory": "2Gi"}, "limits": {"memory": "2Gi"}},
        ),
        (
            {"requests": {"cpu": "250m"}, "limits": {"cpu": 1, "memory": "4Gi"}},
            {
                "requests": {"cpu": "250m", "memory": "153Mi"},
                "limits": {"cpu": "1", "memory": "4Gi"},
            },
        ),
        ({}, {"requests": {"cpu": "50m", "memory": "153Mi"}, "limits": {"memory": "153Mi"}}),
    ],
    ids=["memory-request-sets-the-limit", "each-value-replaces-its-own", "none-given"],
)
@BOTH
def test_the_sidecars_resources_given_replace_the_derived_ones(pod_of, given, expected):
    sidecar = container(pod_of(sidecar={"resources": given}), "sidecar")

    assert sidecar["resources"] == expected


def test_a_group_member_drains_for_the_default_timeout_it_cannot_override():
    planned = member_pod()

    assert planned["spec"]["terminationGracePeriodSeconds"] == 315
    for name in ("runtime", "sidecar"):
        assert {"name": "ASYA_GRACE_S", "value": "300"} in container(planned, name)["env"]


def test_the_end_actors_keep_the_operators_drain_and_sidecar_resources():
    from asya_operator.plans.actor_objects import plan_end_actors

    for deployment in plan_end_actors("team-a", [async_actor(batch={"size": 16})], CONFIG):
        spec = deployment["spec"]["template"]["spec"]
        (sidecar,) = spec["containers"]
        assert spec["terminationGracePeriodSeconds"] == 45
        assert sidecar["resources"]["limits"] == {"memory": "128Mi"}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_a_pod_with_every_field_set_is_valid(version):
    deployment = plan_deployment(
        async_actor(flavor="h100", **EVERY_FIELD), "team-a", FLAVOR, CONFIG
    )
    kubernetes_validate.validate(deployment, version, strict=True)
    kubernetes_validate.validate(statefulset(FLAVOR, **EVERY_FIELD), version, strict=True)
