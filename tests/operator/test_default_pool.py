"""Quota that cannot be skipped, as the plans decide it: an actor's or group's effective pool
(its own, else its namespace's `asya.sh/default-pool`), the PoolRequired problem of one asking
for GPUs in no pool, and `plan`'s what-if: defaulted actors admitted, pool-less GPU actors
listed as outside quota."""

from __future__ import annotations

import msgspec
import pytest
from asya_operator.api.group import ActorGroup
from asya_operator.config import OperatorConfig
from asya_operator.plans.actor_status import find_problems
from asya_operator.plans.conditions import Reason
from asya_operator.plans.files import Document, read_crs
from asya_operator.plans.group_status import find_group_problems
from asya_operator.plans.objects import plan_objects
from asya_operator.plans.pools import effective_pool, with_effective_pool
from asya_operator.plans.whatif import decisions, render_decisions, snapshot_of

from asya.admission.scheduler import simulate
from tests.operator.admission_crs import GROUP, POOL, changed
from tests.operator.plan_builders import async_actor

BOTH_KEYS = {"amqp-url", "management-url"}
DEFAULTED = {"asya.sh/default-pool": "team-a"}
ACTOR = {
    "apiVersion": "asya.sh/v1alpha1",
    "kind": "AsyncActor",
    "metadata": {"name": "embed", "namespace": "ml-a"},
    "spec": {
        "image": "registry.example.com/ml/embed:1",
        "handler": "ml.embed:Embed",
        "resources": {"gpus": 8},
        "scaling": {"maxReplicas": 50},
    },
}


def group(**changes) -> ActorGroup:
    return msgspec.convert(changed(GROUP, **changes), ActorGroup)


def namespace(name, **labels):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def what_if(*bodies):
    documents = [Document(f"doc {i}", body) for i, body in enumerate(bodies, start=1)]
    snapshot = snapshot_of(read_crs(documents, "default"))
    return snapshot, decisions(snapshot, simulate(snapshot.scenario))


@pytest.mark.parametrize(
    ("own", "labels", "expected"),
    [
        ("team-b", DEFAULTED, "team-b"),
        (None, DEFAULTED, "team-a"),
        (None, {"team": "ml"}, None),
        (None, {}, None),
    ],
    ids=["its-own-pool-wins", "the-namespace-default", "other-labels", "no-labels"],
)
def test_an_actors_pool_is_its_own_else_its_namespaces_default(own, labels, expected):
    actor = async_actor(pool=own, resources={"gpus": 1})

    assert effective_pool(actor, labels) == expected
    assert with_effective_pool(actor, labels).spec.pool == expected


def test_a_groups_pool_is_its_namespaces_default_when_it_names_none():
    assert with_effective_pool(group(spec__pool=None), DEFAULTED).spec.pool == "team-a"


def test_a_gpu_actor_in_no_pool_is_pool_required_naming_both_fixes():
    actor = async_actor(resources={"gpus": 8})

    (problem,) = find_problems(
        actor, "ml-a", secret_keys=BOTH_KEYS, flavor=None, keepers={}, pool_required=True
    )

    assert problem.reason is Reason.POOL_REQUIRED
    assert problem.message == (
        "asks for 8 nvidia.com/gpu per replica and has no pool, and this operator runs GPUs only"
        " under a pool's quota: set spec.pool, or label namespace ml-a"
        " asya.sh/default-pool=<pool>"
    )


@pytest.mark.parametrize(
    ("actor", "pool_required"),
    [
        (async_actor(resources={"gpus": 1}), False),
        (async_actor(resources={"cpu": "2"}), True),
        (async_actor(pool="team-a", resources={"gpus": 1}), True),
        (with_effective_pool(async_actor(resources={"gpus": 1}), DEFAULTED), True),
    ],
    ids=["not-required", "no-gpus", "own-pool", "namespace-default-pool"],
)
def test_an_actor_lacks_no_pool_unless_it_asks_for_gpus_in_none_where_one_is_required(
    actor, pool_required
):
    found = find_problems(
        actor,
        "ml-a",
        secret_keys=BOTH_KEYS,
        flavor=None,
        keepers={},
        pool_required=pool_required,
    )

    assert found == []


def test_a_group_with_gpu_members_in_no_pool_is_pool_required():
    kwargs = {"secret_keys": BOTH_KEYS, "missing_flavors": (), "keepers": {}}

    (problem,) = find_group_problems(group(spec__pool=None), "ml-b", **kwargs, pool_required=True)
    own = find_group_problems(group(), "ml-b", **kwargs, pool_required=True)

    assert problem.reason is Reason.POOL_REQUIRED
    assert problem.message.startswith("asks for 4 nvidia.com/gpu per instance and has no pool")
    assert own == []


def test_the_what_if_admits_a_pool_less_actor_through_its_namespaces_default_pool():
    _snapshot, decided = what_if(
        namespace("ml-a", **DEFAULTED), POOL, changed(ACTOR, spec__resources={"gpus": 1})
    )

    (admitted,) = decided["admitted"]
    assert (admitted["workload"], admitted["pool"]) == ("ml-a/embed", "team-a")
    assert "outsideQuota" not in decided


def test_plan_sizes_a_pool_less_actors_deployment_as_its_namespaces_default_pools():
    # Not admitted yet, as the what-if's decisions are not applied: no replica runs.
    actor = changed(ACTOR, spec__scaling={"minReplicas": 2, "maxReplicas": 50})
    documents = [Document("doc 1", namespace("ml-a", **DEFAULTED)), Document("doc 2", actor)]

    planned = plan_objects(read_crs(documents, "default"), OperatorConfig())

    (deployment,) = [
        o.body
        for o in planned
        if (o.body["kind"], o.body["metadata"]["name"]) == ("Deployment", "embed")
    ]
    assert deployment["spec"]["replicas"] == 0


def test_the_what_if_lists_gpu_actors_and_groups_in_no_pool_as_outside_quota():
    cpu_only = changed(ACTOR, metadata__name="clean", spec__resources={"cpu": "1"})
    pool_less_group = changed(GROUP, spec__pool=None)

    _snapshot, decided = what_if(POOL, ACTOR, cpu_only, pool_less_group)
    text = render_decisions(decided)

    assert decided["outsideQuota"] == [
        {
            "workload": "ml-a/embed",
            "kind": "AsyncActor",
            "message": "asks for 8 nvidia.com/gpu per replica, up to 50 replicas"
            " (400 nvidia.com/gpu), in no pool",
        },
        {
            "workload": "ml-b/ddp",
            "kind": "ActorGroup",
            "message": "asks for 4 nvidia.com/gpu per instance, up to 1 instance"
            " (4 nvidia.com/gpu), in no pool",
        },
    ]
    assert decided["admitted"] == decided["pending"] == []
    assert "# 2 outside quota (outsideQuota): asking for GPUs in no pool, which" in text
    assert "# - workload: ml-a/embed\n" in text
