"""Quota, borrowing and lending through cohorts: the examples of the admission issue and more."""

from __future__ import annotations

from asya.admission.model import Cohort, Pool, load_scenario
from asya.admission.scheduler import Scheduler
from asya.admission.tree import QuotaTree
from tests.factories import pool, workload


def test_a_workload_over_the_unused_quota_waits_and_says_how_much_more_it_needs(run):
    done = run(
        [pool("team-a", default={"cpu": 50})],
        [
            workload("running", "team-a", count=40, cpu=1, admitted="default"),
            workload("new", "team-a", count=11, cpu=1),
        ],
    )

    assert set(done.admitted) == {"running"}
    assert done.pending["new"]["reason"] == "InsufficientQuota"
    assert done.pending["new"]["message"].startswith(
        "insufficient quota for cpu in flavor default: needs 11, pool team-a has 10 unused"
        " (1 more needed); preemption could make room, but no admitted workload qualifies"
    )


def test_two_pools_of_a_cohort_within_nominal_are_admitted_in_the_same_cycle():
    scenario = load_scenario(
        {
            "pools": [
                pool("a", cohort="eng", default={"cpu": 10}),
                pool("b", cohort="eng", default={"cpu": 10}),
            ],
            "workloads": [workload("wa", "a", cpu=10), workload("wb", "b", cpu=10)],
        }
    )

    first = Scheduler(scenario).cycle()

    assert sorted(first.admitted) == ["wa", "wb"]


def test_a_pool_borrows_what_its_cohort_neighbour_does_not_use():
    scenario = load_scenario(
        {
            "pools": [
                pool("a", cohort="eng", default={"cpu": 50}),
                pool("b", cohort="eng", default={"cpu": 50}),
            ],
            "workloads": [
                workload("held", "a", count=45, cpu=1, admitted="default"),
                workload("big", "b", count=55, cpu=1),
            ],
        }
    )
    scheduler = Scheduler(scenario)

    scheduler.cycle()

    assert "big" in scheduler.holding
    assert scheduler.holding["big"].borrowing is True
    node = scheduler.tree.pools["b"]
    assert node.usage[("default", "cpu")] - node.nominal(("default", "cpu")) == 5_000  # 5 CPU


def test_a_lender_never_gives_more_than_its_lending_limit(run):
    lender = pool("lender", cohort="eng", default={"cpu": {"nominal": 4, "lendingLimit": 2}})
    borrower = pool("borrower", cohort="eng", default={"cpu": 0})

    done = run(
        [lender, borrower],
        [workload("three", "borrower", cpu=3), workload("two", "borrower", cpu=2, created=1)],
    )

    assert set(done.admitted) == {"two"}
    assert done.pending["three"]["message"] == (
        "insufficient quota for cpu in flavor default: needs 3,"
        " more than pool borrower can ever have (2)"
    )


def test_a_lending_limit_equal_to_nominal_lends_it_all_and_no_more(run):
    lender = pool("lender", cohort="eng", default={"cpu": {"nominal": 2, "lendingLimit": 2}})
    borrower = pool("borrower", cohort="eng", default={"cpu": 0})

    done = run(
        [lender, borrower],
        [workload("w", "borrower", cpu=2), workload("x", "borrower", cpu=1, created=1)],
    )

    assert set(done.admitted) == {"w"}
    assert "may borrow 0 more from cohort eng" in done.pending["x"]["message"]


def test_a_borrowing_limit_caps_what_a_pool_takes_from_its_cohort(run):
    capped = pool("capped", cohort="eng", default={"cpu": {"nominal": 2, "borrowingLimit": 1}})
    rich = pool("rich", cohort="eng", default={"cpu": 100})

    done = run(
        [capped, rich],
        [workload("four", "capped", cpu=4), workload("three", "capped", cpu=3, created=1)],
    )

    assert set(done.admitted) == {"three"}
    assert "more than pool capped can ever have (3)" in done.pending["four"]["message"]


def test_a_parent_cohort_shares_its_own_quota_with_nested_cohorts(run):
    cohorts = [
        {"name": "org", "quotas": [{"flavor": "default", "resources": {"cpu": {"nominal": 6}}}]},
        {"name": "eng", "parent": "org"},
    ]

    done = run(
        [pool("a", cohort="eng", default={"cpu": 2})],
        [workload("w", "a", cpu=8), workload("x", "a", cpu=1, created=1)],
        cohorts=cohorts,
    )

    assert set(done.admitted) == {"w"}
    assert done.admitted["w"]["borrowing"] is True


def test_flavors_are_tried_in_the_pools_order(run):
    gpus = pool("gpus", a100={"nvidia_com_gpu": 2}, h100={"nvidia_com_gpu": 8})

    done = run(
        [gpus],
        [
            workload("small", "gpus", nvidia_com_gpu=1),
            workload("large", "gpus", created=1, nvidia_com_gpu=4),
        ],
    )

    assert (done.flavor("small"), done.flavor("large")) == ("a100", "h100")


def test_a_flavor_that_lacks_a_requested_resource_is_skipped(run):
    mixed = pool("mixed", cpuonly={"cpu": 100}, gpu={"cpu": 8, "nvidia_com_gpu": 1})

    done = run([mixed], [workload("w", "mixed", cpu=1, nvidia_com_gpu=1)])

    assert done.flavor("w") == "gpu"


def test_a_resource_no_flavor_covers_is_pending_with_the_reason(run):
    done = run(
        [pool("cpu-only", default={"cpu": 4})], [workload("w", "cpu-only", nvidia_com_gpu=1)]
    )

    assert "no flavor of pool cpu-only covers nvidia.com/gpu" in done.pending["w"]["message"]


def test_memory_quantities_are_compared_exactly(run):
    done = run(
        [pool("m", default={"memory": "16Gi"})],
        [
            workload("fits", "m", count=2, memory="8Gi"),
            workload("over", "m", created=1, memory="1Mi"),
        ],
    )

    assert set(done.admitted) == {"fits"}
    assert "needs 1Mi, pool m has 0 unused" in done.pending["over"]["message"]


def test_a_namespace_outside_the_pools_list_is_refused(run):
    done = run(
        [pool("a", namespaces=["ml-a"], default={"cpu": 4})],
        [workload("ok", "a", namespace="ml-a", cpu=1), workload("no", "a", namespace="web", cpu=1)],
    )

    assert set(done.admitted) == {"ok"}
    assert done.pending["no"]["reason"] == "NamespaceNotAllowed"


def test_an_unknown_pool_is_pending_not_an_error(run):
    done = run([pool("a", default={"cpu": 4})], [workload("lost", "nowhere", cpu=1)])

    assert done.pending["lost"]["reason"] == "PoolNotFound"


def test_a_pool_named_as_a_cohort_is_not_taken_for_it():
    tree = QuotaTree(
        [Cohort(name="eng")], [Pool(name="eng", cohort="eng"), Pool(name="ops", cohort="eng")]
    )

    assert [n.name for n in tree.subtree_pools(tree.pools["eng"])] == ["eng"]
    assert sorted(n.name for n in tree.subtree_pools(tree.cohorts["eng"])) == ["eng", "ops"]
