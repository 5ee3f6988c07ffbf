"""plan_deployment: an AsyncActor's Deployment, runtime and sidecar, as the operator applies it."""

from __future__ import annotations

import pytest
from asya_operator.config import OperatorConfig
from asya_operator.plans.actor_objects import plan_deployment

from asya.actor import build_spec
from asya.overrides import apply_overrides, parse_overrides
from tests.operator.plan_builders import async_actor, resource_flavor

CONFIG = OperatorConfig(sidecar_image="registry.example.com/asya-sidecar:9.9")
RESTRICTED = {
    "runAsNonRoot": True,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def deployment(actor=None, flavor=None, config=CONFIG, namespace="team-a"):
    return plan_deployment(actor or async_actor(), namespace, flavor, config)


def pod(obj):
    return obj["spec"]["template"]["spec"]


def container(obj, name):
    (found,) = [c for c in pod(obj)["containers"] if c["name"] == name]
    return found


def test_the_runtime_runs_the_users_image_with_the_handler_and_the_socket():
    runtime = container(deployment(), "runtime")

    assert runtime["image"] == "registry.example.com/app:1"
    assert runtime["command"] == ["python", "-m", "asya.runtime"]
    assert runtime["env"] == [
        {"name": "ASYA_HANDLER", "value": "app.text:normalize"},
        {"name": "ASYA_SOCKET_PATH", "value": "/var/run/asya/asya-runtime.sock"},
        {"name": "ASYA_GRACE_S", "value": "300"},
    ]
    assert runtime["volumeMounts"] == [
        {"name": "asya-socket", "mountPath": "/var/run/asya"},
        {"name": "tmp", "mountPath": "/tmp"},
    ]


def test_the_crs_execution_fields_reach_the_runtime_as_overrides_it_applies():
    actor = async_actor(
        timeoutSeconds=5.0,
        concurrency=3,
        retry={"maxAttempts": 2},
        batch={"size": 16},
    )

    env = {var["name"]: var["value"] for var in container(deployment(actor), "runtime")["env"]}

    overrides = parse_overrides(env["ASYA_ACTOR_OVERRIDES"])
    spec = apply_overrides(
        build_spec(_handler, {"name": "normalize", "batch": 4, "batch_wait_ms": 40}), overrides
    )
    assert (spec.timeout_s, spec.concurrency, spec.batch) == (5.0, 3, 16)
    assert spec.retry.max_attempts == 2
    assert spec.batch_wait_ms == 40  # no waitMs in the CR: the decorator's
    assert '"waitMs"' not in env["ASYA_ACTOR_OVERRIDES"]
    assert "ASYA_ACTOR_OVERRIDES" not in str(container(deployment(), "runtime")["env"])


def _handler(payloads):
    return payloads


def test_the_sidecar_gets_actor_namespace_socket_port_and_the_broker_url_from_the_secret():
    sidecar = container(deployment(async_actor(broker={"secretName": "rabbit"})), "sidecar")

    assert sidecar["image"] == "registry.example.com/asya-sidecar:9.9"
    assert sidecar["command"] == ["asya-sidecar"]
    assert sidecar["env"] == [
        {"name": "ASYA_ACTOR", "value": "normalize"},
        {"name": "ASYA_NAMESPACE", "value": "team-a"},
        {"name": "ASYA_SOCKET_PATH", "value": "/var/run/asya/asya-runtime.sock"},
        {"name": "ASYA_HEALTH_PORT", "value": "8080"},
        {"name": "ASYA_GRACE_S", "value": "300"},
        {
            "name": "ASYA_BROKER_URL",
            "valueFrom": {"secretKeyRef": {"name": "rabbit", "key": "amqp-url"}},
        },
    ]
    assert sidecar["volumeMounts"] == [{"name": "asya-socket", "mountPath": "/var/run/asya"}]


def test_no_broker_credential_reaches_the_runtime_container():
    runtime = container(deployment(async_actor(broker={"secretName": "rabbit"})), "runtime")

    names = [var["name"] for var in runtime["env"]]
    assert "ASYA_BROKER_URL" not in names
    assert all("valueFrom" not in var for var in runtime["env"])
    assert "envFrom" not in runtime


def test_the_users_env_comes_first_and_cannot_override_what_the_operator_sets():
    actor = async_actor(
        env=[
            {"name": "MODEL", "value": "small"},
            {"name": "ASYA_HANDLER", "value": "evil:handler"},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
        ],
        envFrom=[{"configMapRef": {"name": "app-config"}}],
    )

    runtime = container(deployment(actor), "runtime")

    assert runtime["env"] == [
        {"name": "MODEL", "value": "small"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
        {"name": "ASYA_HANDLER", "value": "app.text:normalize"},
        {"name": "ASYA_SOCKET_PATH", "value": "/var/run/asya/asya-runtime.sock"},
        {"name": "ASYA_GRACE_S", "value": "300"},
    ]
    assert runtime["envFrom"] == [{"configMapRef": {"name": "app-config"}}]


def test_the_sidecar_is_probed_on_healthz_for_liveness_and_readyz_for_readiness():
    sidecar = container(deployment(), "sidecar")

    assert sidecar["ports"] == [{"name": "health", "containerPort": 8080}]
    assert sidecar["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert sidecar["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}


def test_the_runtime_is_pinged_over_its_socket_and_a_slow_model_load_gets_fifteen_minutes():
    runtime = container(deployment(), "runtime")

    ping = {"command": ["python", "-m", "asya.runtime.probe"]}
    assert runtime["livenessProbe"]["exec"] == ping
    assert runtime["startupProbe"] == {
        "exec": ping,
        "timeoutSeconds": 5,
        "periodSeconds": 10,
        "failureThreshold": 90,
    }


def test_both_containers_and_the_pod_are_restricted_and_run_as_one_non_root_user():
    planned = deployment()

    assert container(planned, "runtime")["securityContext"] == RESTRICTED
    assert container(planned, "sidecar")["securityContext"] == RESTRICTED
    assert pod(planned)["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod(planned)["automountServiceAccountToken"] is False


@pytest.mark.parametrize(
    ("config", "spec", "drain", "grace"),
    [
        (OperatorConfig(), {}, 300, 315),
        (OperatorConfig(), {"timeoutSeconds": 5.0}, 30, 45),
        (OperatorConfig(), {"timeoutSeconds": 1800.5}, 1801, 1816),
        (OperatorConfig(grace_s=600), {}, 600, 615),
        (OperatorConfig(grace_s=10, termination_margin_s=5), {"timeoutSeconds": 2.0}, 10, 15),
    ],
    ids=["default-timeout", "short-timeout", "long-timeout", "long-drain", "short-margin"],
)
def test_the_drain_covers_the_actors_timeout_and_the_termination_grace_the_drain(
    config, spec, drain, grace
):
    # A call under way at SIGTERM may take the actor's whole timeout (default: @actor's 300 s):
    # both containers drain that long, and the kubelet waits the drain plus a margin.
    planned = deployment(async_actor(**spec), config=config)

    assert pod(planned)["terminationGracePeriodSeconds"] == grace
    for name in ("runtime", "sidecar"):
        assert {"name": "ASYA_GRACE_S", "value": str(drain)} in container(planned, name)["env"]


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (
            {"cpu": "250m", "memory": "256Mi"},
            {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "256Mi"}},
        ),
        (
            {"cpu": 2, "memory": "16Gi", "gpus": 1},
            {
                "requests": {"cpu": "2", "memory": "16Gi"},
                "limits": {"memory": "16Gi", "nvidia.com/gpu": "1"},
            },
        ),
        ({"gpus": 4}, {"limits": {"nvidia.com/gpu": "4"}}),
        ({}, {}),
    ],
    ids=["cpu-and-memory", "one-gpu", "gpus-only", "nothing"],
)
def test_the_runtime_requests_what_the_spec_asks_with_gpus_as_limits(resources, expected):
    runtime = container(deployment(async_actor(resources=resources)), "runtime")

    assert runtime["resources"] == expected


def test_the_flavor_gives_the_node_selector_and_a_toleration_per_taint_then_its_own():
    flavor = resource_flavor(
        "a100",
        nodeLabels={"gpu.example.com/model": "a100"},
        nodeTaints=[
            {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
            {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
        ],
        tolerations=[{"key": "spot", "operator": "Exists"}],
    )

    planned = deployment(async_actor(flavor="a100"), flavor)

    assert pod(planned)["nodeSelector"] == {"gpu.example.com/model": "a100"}
    assert pod(planned)["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"},
        {"key": "spot", "operator": "Exists"},
    ]


def test_an_actor_without_a_flavor_is_placed_anywhere():
    planned = deployment()

    assert "nodeSelector" not in pod(planned)
    assert "tolerations" not in pod(planned)


def test_a_flavor_other_than_the_one_the_actor_names_is_refused():
    with pytest.raises(ValueError, match="names flavor 'a100', given None"):
        deployment(async_actor(flavor="a100"), None)


def test_labels_selector_and_volumes_tie_the_pods_to_the_actor():
    planned = deployment()

    assert planned["metadata"]["name"] == "normalize"
    assert planned["metadata"]["namespace"] == "team-a"
    assert planned["spec"]["selector"] == {
        "matchLabels": {"app.kubernetes.io/component": "actor", "asya.sh/actor": "normalize"}
    }
    assert planned["spec"]["template"]["metadata"]["labels"] == {
        "app.kubernetes.io/name": "normalize",
        "app.kubernetes.io/part-of": "asya",
        "app.kubernetes.io/managed-by": "asya-operator",
        "app.kubernetes.io/component": "actor",
        "asya.sh/actor": "normalize",
    }
    assert pod(planned)["volumes"] == [
        {"name": "asya-socket", "emptyDir": {}},
        {"name": "tmp", "emptyDir": {}},
    ]


def test_the_deployment_is_controlled_by_its_async_actor():
    planned = deployment(async_actor(uid="0b7e-uid"))

    assert planned["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "asya.sh/v1alpha1",
            "kind": "AsyncActor",
            "name": "normalize",
            "uid": "0b7e-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def test_an_actor_not_yet_applied_has_no_uid_and_so_no_owner_reference():
    planned = deployment(async_actor(uid=None))

    assert "ownerReferences" not in planned["metadata"]


@pytest.mark.parametrize(
    ("replicas", "scaling", "expected"),
    [
        (None, {"minReplicas": 0, "maxReplicas": 5}, 0),
        (None, {"minReplicas": 2, "maxReplicas": 5}, 2),
        (3, {"minReplicas": 1, "maxReplicas": 5}, 3),
        (0, {"minReplicas": 0, "maxReplicas": 5}, 0),
        (9, {"minReplicas": 0, "maxReplicas": 5}, 5),
        (0, {"minReplicas": 1, "maxReplicas": 5}, 1),
    ],
    ids=["unset-min-0", "unset-min-2", "keda-wrote-3", "keda-wrote-0", "above-max", "below-min"],
)
def test_replicas_follow_the_scale_subresource_within_the_scaling_bounds(
    replicas, scaling, expected
):
    actor = async_actor(replicas=replicas, scaling=scaling)

    assert deployment(actor)["spec"]["replicas"] == expected


NO_SURGE = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
KUBERNETES_DEFAULT = {
    "type": "RollingUpdate",
    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
}


@pytest.mark.parametrize(
    ("fields", "strategy"),
    [
        ({"resources": {"gpus": 1}}, NO_SURGE),
        ({"resources": {"gpus": 1}, "pool": "team-a"}, NO_SURGE),
        ({"pool": "team-a"}, NO_SURGE),  # under quota: a surge pod would need quota it lacks
        ({}, KUBERNETES_DEFAULT),
    ],
    ids=["gpus", "gpus-in-a-pool", "cpu-in-a-pool", "no-gpus-no-pool"],
)
def test_an_actor_with_gpus_or_quota_rolls_without_a_surge_pod_and_others_as_kubernetes_does(
    fields, strategy
):
    assert deployment(async_actor(**fields))["spec"]["strategy"] == strategy
