"""The asya-operator chart's RBAC: everything the operator calls, nothing more, and with
`watchNamespace` set (a namespace or a list), namespaced access (Secrets first of all) only
in those namespaces.

What the operator calls, read from its code: kopf watches AsyncActors, ActorGroups, their
Deployments and StatefulSets and Secrets in the namespaces it serves (`asya-operator run
--namespace`), and always ResourcePools, Cohorts (cluster-scoped), CRDs and namespaces
(`kopf._core.reactor.observation`); the operator's own handler watches namespaces too (their
`asya.sh/default-pool` label), cluster-wide whatever it serves: kopf watches a cluster-scoped
kind cluster-wide (`kopf._core.reactor.orchestration`). The admission pass
(`kube.Kube.admission_world`) lists the AsyncActors, ActorGroups and StatefulSets of the
namespaces it serves (every one, or the watched one), reads the labels of their namespaces,
and lists the Nodes (cluster-scoped: a flavor whose nodes advertise no accelerator is named in
the statuses). kopf posts the Events of a
cluster-scoped object (a pool) in its own namespace.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.charts.chart_checks import (
    NAMESPACE,
    OPERATOR_CHART,
    OPERATOR_IMAGES,
    RELEASE,
    check_all,
    lint_problems,
    of_kind,
    rendered,
)
from tests.charts.test_operator_chart import NEEDED

Rule = tuple[str, str, str]

WATCHED = "team-a"

# Cluster-scoped kinds: the ClusterRole of an operator that watches one namespace holds these
# and nothing else.
CLUSTER_WIDE: set[Rule] = {
    ("asya.sh", "resourceflavors", "get"),
    ("asya.sh", "resourceflavors", "list"),
    ("asya.sh", "resourceflavors", "watch"),
    ("asya.sh", "resourcepools", "list"),
    ("asya.sh", "resourcepools", "watch"),
    ("asya.sh", "resourcepools/status", "patch"),
    ("asya.sh", "cohorts", "list"),
    ("asya.sh", "cohorts", "watch"),
    ("asya.sh", "cohorts/status", "patch"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
    ("", "namespaces", "get"),
    ("", "namespaces", "list"),
    ("", "namespaces", "watch"),
    ("", "nodes", "get"),
    ("", "nodes", "list"),
}
CLUSTER_SCOPED = {
    "resourceflavors",
    "resourcepools",
    "resourcepools/status",
    "cohorts",
    "cohorts/status",
    "customresourcedefinitions",
    "namespaces",
    "nodes",
}


def _granted(role: dict[str, Any]) -> set[Rule]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def _by_namespace(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    # Not `of_kind`, which keys by name: the Roles of several namespaces share their name.
    found: dict[str, dict[str, Any]] = {}
    for obj in objects:
        if obj["kind"] == kind:
            namespace = obj["metadata"]["namespace"]
            assert namespace not in found, f"two {kind}s in {namespace}"
            found[namespace] = obj
    return found


def _bound_to_the_operator(binding: dict[str, Any], role: dict[str, Any]) -> bool:
    return binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": role["kind"],
        "name": role["metadata"]["name"],
    } and binding["subjects"] == [
        {"kind": "ServiceAccount", "name": f"{RELEASE}-asya-operator", "namespace": NAMESPACE}
    ]


def test_watching_every_namespace_is_one_cluster_role_and_no_role():
    objects = rendered(OPERATOR_CHART, OPERATOR_IMAGES)

    (role,) = of_kind(objects, "ClusterRole").values()
    (binding,) = of_kind(objects, "ClusterRoleBinding").values()
    assert _granted(role) >= NEEDED
    assert _bound_to_the_operator(binding, role)
    assert of_kind(objects, "Role") == of_kind(objects, "RoleBinding") == {}


def test_watching_one_namespace_reads_secrets_only_there():
    objects = rendered(OPERATOR_CHART, {**OPERATOR_IMAGES, "watchNamespace": WATCHED})

    (cluster_role,) = of_kind(objects, "ClusterRole").values()
    roles = _by_namespace(objects, "Role")
    assert _granted(cluster_role) == CLUSTER_WIDE
    assert ("", "secrets", "get") in _granted(roles[WATCHED])
    assert not {rule for rule in _granted(cluster_role) if rule[1] == "secrets"}


def test_watching_one_namespace_grants_there_all_the_operator_calls():
    objects = rendered(OPERATOR_CHART, {**OPERATOR_IMAGES, "watchNamespace": WATCHED})

    (cluster_role,) = of_kind(objects, "ClusterRole").values()
    roles = _by_namespace(objects, "Role")
    assert _granted(cluster_role) | _granted(roles[WATCHED]) >= NEEDED
    # A Role's grant on a cluster-scoped kind would grant nothing.
    assert not {rule[1] for rule in _granted(roles[WATCHED])} & CLUSTER_SCOPED
    # The pool's Events, which kopf posts in the operator's own namespace.
    assert _granted(roles[NAMESPACE]) == {
        ("", "events", "create"),
        ("events.k8s.io", "events", "create"),
    }


def test_every_role_is_bound_to_the_operators_service_account():
    objects = rendered(OPERATOR_CHART, {**OPERATOR_IMAGES, "watchNamespace": WATCHED})

    roles = _by_namespace(objects, "Role")
    bindings = _by_namespace(objects, "RoleBinding")
    (cluster_role,) = of_kind(objects, "ClusterRole").values()
    (cluster_binding,) = of_kind(objects, "ClusterRoleBinding").values()
    assert set(roles) == set(bindings) == {WATCHED, NAMESPACE}
    assert all(_bound_to_the_operator(bindings[ns], roles[ns]) for ns in roles)
    assert _bound_to_the_operator(cluster_binding, cluster_role)


def test_watching_the_operators_own_namespace_is_one_role_there():
    objects = rendered(OPERATOR_CHART, {**OPERATOR_IMAGES, "watchNamespace": NAMESPACE})

    roles = _by_namespace(objects, "Role")
    assert set(roles) == set(_by_namespace(objects, "RoleBinding")) == {NAMESPACE}
    assert ("", "events", "create") in _granted(roles[NAMESPACE])
    assert ("", "secrets", "watch") in _granted(roles[NAMESPACE])


def test_watching_several_namespaces_is_a_role_in_each_and_secrets_nowhere_else():
    watched = [WATCHED, "team-b"]
    objects = rendered(OPERATOR_CHART, {**OPERATOR_IMAGES, "watchNamespace": watched})

    (cluster_role,) = of_kind(objects, "ClusterRole").values()
    roles = _by_namespace(objects, "Role")
    bindings = _by_namespace(objects, "RoleBinding")
    assert _granted(cluster_role) == CLUSTER_WIDE
    assert set(roles) == set(bindings) == {WATCHED, "team-b", NAMESPACE}
    for namespace in (WATCHED, "team-b"):
        assert _granted(cluster_role) | _granted(roles[namespace]) >= NEEDED
        assert _bound_to_the_operator(bindings[namespace], roles[namespace])
    (deployment,) = of_kind(objects, "Deployment").values()
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["run", "--namespace", WATCHED, "--namespace", "team-b"]


def test_an_empty_list_watches_every_namespace():
    objects = rendered(OPERATOR_CHART, {**OPERATOR_IMAGES, "watchNamespace": []})

    (deployment,) = of_kind(objects, "Deployment").values()
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["run"]
    assert of_kind(objects, "Role") == {}


@pytest.mark.parametrize(
    "watch",
    ["", WATCHED, [WATCHED, "team-b"]],
    ids=["every namespace", "one namespace", "two namespaces"],
)
def test_the_rbac_objects_are_valid_and_lint_clean(watch):
    values = {**OPERATOR_IMAGES, "watchNamespace": watch}

    check_all(rendered(OPERATOR_CHART, values))
    assert lint_problems(OPERATOR_CHART, values) == []


@pytest.mark.parametrize("watch", ["", WATCHED], ids=["every namespace", "one namespace"])
def test_the_cluster_role_reads_nodes_and_never_writes_them(watch):
    objects = rendered(OPERATOR_CHART, {**OPERATOR_IMAGES, "watchNamespace": watch})

    (cluster_role,) = of_kind(objects, "ClusterRole").values()
    assert {rule for rule in _granted(cluster_role) if rule[1].startswith("nodes")} == {
        ("", "nodes", "get"),
        ("", "nodes", "list"),
    }
