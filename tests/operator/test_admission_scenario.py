"""CRs to an admission scenario: pools, cohorts, elastic actors and gang instances, as the
engine reads them (quantities in milli-units)."""

from __future__ import annotations

import pytest
from asya_operator.api.pool import NamespaceSelector
from asya_operator.plans.files import CrError, Document, read_crs
from asya_operator.plans.quota import selects
from asya_operator.plans.whatif import decisions, snapshot_of

from asya.admission.model import Pool
from asya.admission.quotas import Preemption
from asya.admission.scheduler import simulate
from tests.operator.admission_crs import COHORT, GROUP, POOL, changed, member

ACTOR = {
    "apiVersion": "asya.sh/v1alpha1",
    "kind": "AsyncActor",
    "metadata": {"name": "embed", "namespace": "ml-a"},
    "spec": {
        "image": "registry.example.com/ml/embed:1",
        "handler": "ml.embed:Embed",
        "pool": "team-a",
        "resources": {"cpu": "500m", "memory": "1Gi", "gpus": 2},
        "scaling": {"maxReplicas": 6},
    },
}
FLAVOR = {
    "apiVersion": "asya.sh/v1alpha1",
    "kind": "ResourceFlavor",
    "metadata": {"name": "h100"},
    "spec": {},
}
GIB_MILLI = 1024**3 * 1000


def snapshot(*bodies, namespace="default"):
    documents = [Document(f"doc {i}", body) for i, body in enumerate(bodies, start=1)]
    return snapshot_of(read_crs(documents, namespace))


def namespace(name, **labels):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_an_actor_with_a_pool_asks_for_max_replicas_and_takes_any_count_from_one():
    (workload,) = snapshot(POOL, ACTOR).scenario.workloads

    (pod_set,) = workload.pod_sets
    assert (workload.name, workload.pool, workload.namespace) == ("ml-a/embed", "team-a", "ml-a")
    assert (pod_set.count, pod_set.min_count) == (6, 1)
    assert pod_set.requests == {"cpu": 500, "memory": GIB_MILLI, "nvidia.com/gpu": 2000}


def test_an_actor_that_keeps_replicas_running_is_admitted_with_no_fewer():
    actor = changed(ACTOR, spec__scaling={"minReplicas": 3, "maxReplicas": 6})

    (workload,) = snapshot(POOL, actor).scenario.workloads

    assert workload.pod_sets[0].min_count == 3


def test_an_actor_without_a_pool_is_not_an_admission_workload():
    assert snapshot(POOL, changed(ACTOR, spec__pool=None)).scenario.workloads == ()


def test_each_gang_instance_is_a_workload_with_one_pod_set_per_member_and_its_priority():
    coordinator = member(name="coordinator", replicas=1, minReplicas=1)
    group = changed(
        GROUP,
        spec__replicas=2,
        spec__priority=10,
        spec__members=[member(minReplicas=2), coordinator],
    )

    workloads = snapshot(POOL, group).scenario.workloads

    assert [w.name for w in workloads] == ["ml-b/ddp[0]", "ml-b/ddp[1]"]
    assert {w.priority for w in workloads} == {10}
    sets = [(p.name, p.count, p.min_count, p.requests) for p in workloads[0].pod_sets]
    gpu_and_cpu = {"cpu": 8000, "nvidia.com/gpu": 1000}
    assert sets == [("worker", 4, 2, gpu_and_cpu), ("coordinator", 1, 1, gpu_and_cpu)]


def test_a_group_without_replicas_is_one_gang_instance():
    workloads = snapshot(POOL, changed(GROUP, spec__replicas=None)).scenario.workloads

    assert [w.name for w in workloads] == ["ml-b/ddp[0]"]


def test_an_instance_in_the_groups_status_already_holds_its_quota():
    status = {
        "instances": [
            {
                "instance": 0,
                "phase": "WaitingForReady",
                "members": [{"name": "worker", "flavor": "h100", "replicas": 3}],
            },
            {"instance": 1, "phase": "BackingOff", "evictions": 1},
        ]
    }
    group = changed(GROUP, spec__replicas=2, spec__pool="team-a", status=status)

    first, second = snapshot(POOL, group).scenario.workloads

    assert [(a.pod_set, a.flavor, a.count) for a in first.admitted or ()] == [("worker", "h100", 3)]
    assert second.admitted is None


def test_age_is_the_order_of_the_documents():
    later_actor = changed(ACTOR, metadata__name="late")

    workloads = snapshot(POOL, ACTOR, GROUP, later_actor).scenario.workloads

    by_age = sorted(workloads, key=lambda w: w.created)
    assert [w.name for w in by_age] == ["ml-a/embed", "ml-b/ddp[0]", "ml-a/late"]


def test_a_pool_hands_the_engine_its_quota_as_the_cr_writes_it_and_the_engines_defaults():
    (pool,) = snapshot(POOL).scenario.pools

    (flavor,) = pool.quotas
    gpu, cpu = flavor.quota("nvidia.com/gpu"), flavor.quota("cpu")
    assert (pool.name, pool.cohort, flavor.flavor) == ("team-a", "eng", "h100")
    assert (gpu.nominal, gpu.borrowing_limit, gpu.lending_limit) == (8, None, 2)
    assert cpu.nominal == "64"
    assert (pool.queueing_strategy, pool.preemption) == (
        Pool(name="x").queueing_strategy,
        Preemption(),
    )


def test_a_pool_takes_its_queueing_and_preemption_from_the_cr():
    pool = changed(
        POOL,
        spec__queueingStrategy="StrictFIFO",
        spec__preemption={
            "withinPool": "LowerOrNewerEqualPriority",
            "reclaimWithinCohort": "LowerPriority",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 5},
        },
    )

    (translated,) = snapshot(pool).scenario.pools

    preemption = translated.preemption
    assert translated.queueing_strategy.value == "StrictFIFO"
    assert (preemption.within_pool.value, preemption.reclaim_within_cohort.value) == (
        "LowerOrNewerEqualPriority",
        "LowerPriority",
    )
    assert (
        preemption.borrow_within_cohort.policy.value,
        preemption.borrow_within_cohort.max_priority_threshold,
    ) == (
        "LowerPriority",
        5,
    )


def test_a_cohort_keeps_its_parent_and_quota():
    cohort = changed(
        COHORT,
        spec__quotas=[{"flavor": "h100", "resources": [{"name": "nvidia.com/gpu", "nominal": 2}]}],
    )

    (translated,) = snapshot(cohort).scenario.cohorts

    assert (translated.name, translated.parent) == ("eng", "company")
    assert translated.quotas[0].quota("nvidia.com/gpu").nominal == 2


@pytest.mark.parametrize(
    ("selector", "allowed"),
    [
        (None, None),
        ({}, None),
        ({"matchLabels": {"team": "a"}}, ("ml-a",)),
        (
            {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]},
            ("ml-a", "ml-b"),
        ),
        (
            {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]},
            ("ml-b", "web"),
        ),
        ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, ("ml-a", "ml-b")),
        ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, ("web",)),
        (
            {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["web"]}
                ]
            },
            ("web",),
        ),
    ],
    ids=["unset", "empty", "labels", "in", "not-in", "exists", "does-not-exist", "by-name"],
)
def test_a_namespace_selector_allows_the_namespaces_of_the_files_it_selects(selector, allowed):
    pool = changed(POOL, spec__namespaceSelector=selector)
    web_actor = changed(ACTOR, metadata__namespace="web")

    scenario = snapshot(
        pool, namespace("ml-a", team="a"), namespace("ml-b", team="b"), web_actor
    ).scenario

    assert scenario.pools[0].namespaces == allowed


def test_match_labels_and_expressions_must_all_hold():
    selector = NamespaceSelector(match_labels={"team": "a"})

    assert selects(selector, {"team": "a", "tier": "gpu"})
    assert not selects(selector, {"team": "b"})
    assert not selects(selector, {})


def test_a_scenario_the_engine_refuses_is_a_cr_error_with_the_engines_reason():
    loop = [
        changed(COHORT, metadata__name="a", spec__parent="b"),
        changed(COHORT, metadata__name="b", spec__parent="a"),
    ]

    with pytest.raises(CrError, match="the admission scenario of these files: cohorts form a loop"):
        snapshot(*loop)


def test_a_workload_is_kept_to_the_flavor_its_cr_names():
    pool = changed(POOL, spec__quotas__0__flavor="a100")
    actor = changed(ACTOR, spec__flavor="h100", spec__resources={"gpus": 2})
    shot = snapshot(FLAVOR, pool, actor)

    decided = decisions(shot, simulate(shot.scenario))

    assert decided["admitted"] == []
    (pending,) = decided["pending"]
    assert "may use only flavor h100, which pool" in pending["message"]


def test_the_decisions_name_each_workloads_kind_and_the_pool_a_pending_one_waits_for():
    small = changed(
        POOL,
        spec__quotas__0__resources=[
            {"name": "nvidia.com/gpu", "nominal": 4},
            {"name": "cpu", "nominal": 64},
            {"name": "memory", "nominal": "64Gi"},
        ],
    )
    shot = snapshot(small, ACTOR, changed(GROUP, spec__pool="team-a"))

    decided = decisions(shot, simulate(shot.scenario))

    assert [(a["workload"], a["kind"]) for a in decided["admitted"]] == [
        ("ml-a/embed", "AsyncActor")
    ]
    assert decided["admitted"][0]["podSets"][0]["count"] == 2
    (pending,) = decided["pending"]
    assert (pending["workload"], pending["kind"], pending["pool"]) == (
        "ml-b/ddp[0]",
        "ActorGroup",
        "team-a",
    )
    assert pending["message"].startswith(
        "insufficient quota for nvidia.com/gpu in flavor h100: needs 4"
    )


def test_the_decisions_say_where_work_asking_for_no_accelerator_lands_on_one_and_why():
    actor = changed(ACTOR, spec__resources={"cpu": "500m"})
    shot = snapshot(POOL, actor)

    decided = decisions(shot, simulate(shot.scenario))

    (admitted,) = decided["admitted"]
    assert admitted["acceleratorFallbacks"] == [
        {
            "podSet": "replica",
            "flavor": "h100",
            "cause": "NotCovered",
            "message": "on h100: pool team-a has no flavor without accelerators covering cpu",
        }
    ]
