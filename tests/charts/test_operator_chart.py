"""The asya-operator chart, rendered and linted by real Helm, every object validated."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from asya_operator.config import OperatorConfig, load_operator_config, operator_env_var
from asya_operator.plans.actor_objects import plan_deployment

from tests.charts.chart_checks import (
    OPERATOR_CHART,
    OPERATOR_IMAGES,
    RELEASE,
    check_all,
    lint_problems,
    notes,
    of_kind,
    rendered,
    values_error,
)
from tests.operator.plan_builders import async_actor

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"

VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults but the images": OPERATOR_IMAGES,
    "one namespace, a ServiceMonitor, own images": {
        "watchNamespace": "team-a",
        "image": {"repository": "registry.example.com/asya-operator", "tag": "0.1.0-rc1"},
        "sidecar": {"image": {"repository": "registry.example.com/asya-sidecar", "tag": "rc1"}},
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
        "config": {"graceS": 120, "recheckS": 5.0},
        "tolerations": [{"key": "system", "operator": "Exists"}],
    },
}


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = of_kind(objects, "Deployment").values()
    (operator,) = deployment["spec"]["template"]["spec"]["containers"]
    return operator


def env_of(objects: list[dict[str, Any]]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container(objects)["env"]}


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_every_value_set_renders_valid_objects_and_lints_clean(values):
    objects = rendered(OPERATOR_CHART, values)

    check_all(objects)
    assert lint_problems(OPERATOR_CHART, values) == []
    kinds = sorted(obj["kind"] for obj in objects)
    assert {"ClusterRole", "ClusterRoleBinding", "Deployment", "Service", "ServiceAccount"} <= set(
        kinds
    )


def test_the_chart_defaults_are_the_operators_own_defaults():
    env = env_of(rendered(OPERATOR_CHART, OPERATOR_IMAGES))

    config = load_operator_config(env)

    # Every field reaches the operator from the chart, with the value the code defaults to.
    assert {operator_env_var(f.name) for f in msgspec.structs.fields(OperatorConfig)} <= set(env)
    assert config == OperatorConfig(sidecar_image="registry.example.com/asya-sidecar:0.1.0")


def test_config_values_and_images_reach_the_operator():
    objects = rendered(OPERATOR_CHART, VALUE_SETS["one namespace, a ServiceMonitor, own images"])

    config = load_operator_config(env_of(objects))
    operator = container(objects)

    assert (config.grace_s, config.recheck_s) == (120, 5.0)
    assert config.sidecar_image == "registry.example.com/asya-sidecar:rc1"
    assert operator["image"] == "registry.example.com/asya-operator:0.1.0-rc1"
    assert operator["args"] == ["run", "--namespace", "team-a"]


def test_the_operator_runs_restricted_with_probes_on_its_port():
    objects = rendered(OPERATOR_CHART, {**OPERATOR_IMAGES, "port": 9090})
    (deployment,) = of_kind(objects, "Deployment").values()
    pod = deployment["spec"]["template"]["spec"]
    operator = container(objects)

    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert operator["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert operator["ports"] == [{"name": "http", "containerPort": 9090, "protocol": "TCP"}]
    assert operator["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert env_of(objects)["ASYA_OPERATOR_PORT"] == "9090"
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


def rules(objects: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    (role,) = of_kind(objects, "ClusterRole").values()
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


# What the controller's handlers and kopf itself call (asya_operator.kube, .controller).
NEEDED = (
    {("asya.sh", "asyncactors", verb) for verb in ("get", "list", "watch", "patch")}
    | {
        ("asya.sh", "asyncactors/status", "patch"),
        ("asya.sh", "resourceflavors", "get"),
        ("asya.sh", "asyncactors/finalizers", "update"),
        ("asya.sh", "actorgroups", "get"),
        ("asya.sh", "actorgroups", "list"),
        ("asya.sh", "actorgroups", "watch"),
        ("asya.sh", "actorgroups", "patch"),
        ("asya.sh", "actorgroups/status", "patch"),
        ("asya.sh", "actorgroups/finalizers", "update"),
        ("apps", "statefulsets", "create"),
        ("apps", "statefulsets", "patch"),
        ("apps", "statefulsets", "list"),
        ("apps", "statefulsets", "watch"),
        ("apps", "statefulsets", "delete"),
        ("", "services", "list"),
        ("", "services", "create"),
        ("", "services", "patch"),
        ("", "services", "delete"),
        ("asya.sh", "resourcepools", "list"),
        ("asya.sh", "resourcepools/status", "patch"),
        ("asya.sh", "resourcepools", "watch"),
        ("asya.sh", "cohorts", "list"),
        ("asya.sh", "cohorts", "watch"),
        ("asya.sh", "cohorts/status", "patch"),
        ("", "namespaces", "get"),
        ("", "namespaces", "list"),
        ("", "namespaces", "watch"),
        ("", "nodes", "list"),
        ("apps", "deployments", "create"),
        ("apps", "deployments", "patch"),
        ("apps", "deployments", "watch"),
        ("keda.sh", "scaledobjects", "create"),
        ("keda.sh", "scaledobjects", "patch"),
        ("keda.sh", "triggerauthentications", "patch"),
        ("", "secrets", "get"),
        ("", "secrets", "list"),
        ("", "secrets", "watch"),
        ("", "events", "create"),
        ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
    }
    | {
        (group, "podgroups", verb)
        for group in ("scheduling.k8s.io", "scheduling.volcano.sh", "scheduling.run.ai")
        for verb in ("get", "list", "watch", "create", "patch", "delete")
    }
)


def test_the_cluster_role_grants_what_the_operator_calls_and_deletes_only_what_it_makes():
    granted = rules(rendered(OPERATOR_CHART, OPERATOR_IMAGES))

    assert granted >= NEEDED
    assert not {rule for rule in granted if "*" in rule}
    # Delete only where owner references need it (OwnerReferencesPermissionEnforcement), and a
    # gang instance's objects when it loses its quota.
    deletable = {rule[:2] for rule in granted if rule[2] in ("delete", "deletecollection")}
    assert deletable == {
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("", "services"),
        ("keda.sh", "scaledobjects"),
        ("keda.sh", "triggerauthentications"),
        ("scheduling.k8s.io", "podgroups"),
        ("scheduling.volcano.sh", "podgroups"),
        ("scheduling.run.ai", "podgroups"),
    }
    # Secrets are read and watched (an actor's Secret going is in its status), never written
    # (but with a broker administrator: below).
    assert {rule for rule in granted if rule[1] == "secrets"} == {
        ("", "secrets", verb) for verb in ("get", "list", "watch")
    }


def test_the_service_monitor_scrapes_the_metrics_service():
    objects = rendered(
        OPERATOR_CHART, {**OPERATOR_IMAGES, "metrics": {"serviceMonitor": {"enabled": True}}}
    )

    (service,) = of_kind(objects, "Service").values()
    (monitor,) = of_kind(objects, "ServiceMonitor").values()
    (deployment,) = of_kind(objects, "Deployment").values()
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s"}]
    assert [p["name"] for p in service["spec"]["ports"]] == ["http"]


def test_a_service_monitor_without_the_service_is_refused():
    message = values_error(
        OPERATOR_CHART,
        {
            **OPERATOR_IMAGES,
            "metrics": {"service": {"enabled": False}, "serviceMonitor": {"enabled": True}},
        },
    )

    assert "metrics.serviceMonitor.enabled needs metrics.service.enabled" in message


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"config": {"graceSeconds": 3}}, "'graceSeconds' not allowed"),
        ({"config": {"recheckS": "soon"}}, "/config/recheckS"),
        ({"logLevel": "LOUD"}, "/logLevel"),
        ({"watchNamespace": "Team_A"}, "/watchNamespace"),
        ({"watchNamespace": ["team-a", "Team_B"]}, "/watchNamespace"),
        ({"watchNamespace": ["team-a", "team-a"]}, "are equal"),
        ({"port": 70000}, "/port"),
    ],
)
def test_bad_values_are_refused_at_render_naming_the_field(values, named):
    assert named in values_error(OPERATOR_CHART, {**OPERATOR_IMAGES, **values})


def test_the_charts_version_is_asyas_and_the_default_tags_follow_it():
    version = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["version"]
    chart = yaml.safe_load((OPERATOR_CHART / "Chart.yaml").read_text(encoding="utf-8"))

    operator = container(rendered(OPERATOR_CHART, OPERATOR_IMAGES))

    assert chart["appVersion"] == version
    assert operator["image"] == f"registry.example.com/asya-operator:{version}"
    assert env_of(rendered(OPERATOR_CHART, OPERATOR_IMAGES))["ASYA_OPERATOR_SIDECAR_IMAGE"] == (
        f"registry.example.com/asya-sidecar:{version}"
    )


@pytest.mark.parametrize(
    ("values", "named"),
    [
        (
            {"sidecar": OPERATOR_IMAGES["sidecar"]},
            "image.repository: no image is published at ghcr.io/asya-sh/asya-operator yet",
        ),
        (
            {"image": OPERATOR_IMAGES["image"]},
            "sidecar.image.repository: no image is published at ghcr.io/asya-sh/asya-sidecar yet",
        ),
        ({}, "images/operator/Dockerfile"),
    ],
    ids=["operator", "sidecar", "both"],
)
def test_the_placeholder_images_fail_at_render_saying_what_to_set(values, named):
    assert named in values_error(OPERATOR_CHART, values)


def test_the_notes_say_what_to_do_next():
    text = notes(OPERATOR_CHART, OPERATOR_IMAGES)

    assert f"kubectl logs deployment/{RELEASE}-asya-operator" in text
    assert "kubectl create secret generic asya-broker" in text
    assert "asya render" in text
    assert "helm install platform charts/asya-platform" in text


def test_the_pod_monitor_selects_every_actor_pod_the_operator_makes_on_its_health_port():
    planned = plan_deployment(
        async_actor(), "team-a", None, OperatorConfig(sidecar_image="reg/sidecar:1")
    )
    pod = planned["spec"]["template"]

    objects = rendered(
        OPERATOR_CHART, {**OPERATOR_IMAGES, "metrics": {"podMonitor": {"enabled": True}}}
    )

    (monitor,) = of_kind(objects, "PodMonitor").values()
    assert monitor["spec"]["namespaceSelector"] == {"any": True}
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    ports = [p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", ())]
    assert endpoint["port"] in ports
    assert endpoint["path"] == pod["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"
    assert of_kind(rendered(OPERATOR_CHART, OPERATOR_IMAGES), "PodMonitor") == {}


def test_with_a_broker_administrator_the_operator_may_create_and_delete_secrets_and_read_its_own():
    admin = {"config": {"brokerAdminSecret": "asya-system/rabbitmq-admin"}}

    everywhere = rendered(OPERATOR_CHART, {**OPERATOR_IMAGES, **admin})
    watching = rendered(OPERATOR_CHART, {**OPERATOR_IMAGES, **admin, "watchNamespace": "team-a"})

    assert {rule for rule in rules(everywhere) if rule[1] == "secrets"} == {
        ("", "secrets", verb) for verb in ("get", "list", "watch", "create", "patch", "delete")
    }
    assert env_of(everywhere)["ASYA_OPERATOR_BROKER_ADMIN_SECRET"] == "asya-system/rabbitmq-admin"
    # Watching team-a only: a Role there may write Secrets, and one in asya-system reads the
    # administrator's Secret by name, nothing else of that namespace
    roles = {
        (r["metadata"]["namespace"], r["metadata"]["name"]): r
        for r in of_kind(watching, "Role").values()
    }
    (team,) = [r for (ns, _), r in roles.items() if ns == "team-a"]
    assert {"create", "patch", "delete"} <= {
        v for rule in team["rules"] if "secrets" in rule["resources"] for v in rule["verbs"]
    }
    (own,) = [
        r
        for (ns, name), r in roles.items()
        if ns == "asya-system" and name.endswith("-broker-admin")
    ]
    assert own["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["rabbitmq-admin"],
            "verbs": ["get"],
        }
    ]


@pytest.mark.parametrize("value", ["rabbitmq-admin", "Asya/admin", "a/b/c"])
def test_a_broker_administrator_secret_that_is_not_namespace_slash_name_is_refused(value):
    values = {**OPERATOR_IMAGES, "config": {"brokerAdminSecret": value}}

    assert "/config/brokerAdminSecret" in values_error(OPERATOR_CHART, values)
