"""Priority preemption in a pool, and reclaiming lent quota across a cohort."""

from __future__ import annotations

import pytest

from tests.factories import pool, workload


def test_a_higher_priority_workload_preempts_exactly_the_lowest_priority_one(run):
    done = run(
        [pool("p", within="LowerPriority", default={"cpu": 6})],
        [
            workload("low", "p", priority=-1, cpu=2, admitted="default", created=0),
            workload("mid", "p", priority=0, cpu=2, admitted="default", created=1),
            workload("high", "p", priority=1, cpu=2, admitted="default", created=2),
            workload("urgent", "p", priority=1, cpu=2, created=3),
        ],
    )

    assert done.preempted == [("low", "urgent", "InPool")]
    assert set(done.admitted) == {"mid", "high", "urgent"}
    assert done.pending["low"]["reason"] == "InsufficientQuota"


def test_among_equal_priorities_the_most_recently_admitted_is_preempted_first(run):
    done = run(
        [pool("p", within="LowerPriority", default={"cpu": 4})],
        [
            workload("first", "p", priority=0, cpu=2, admitted="default", created=0),
            workload("second", "p", priority=0, cpu=2, admitted="default", created=1),
            workload("vip", "p", priority=5, cpu=2, created=2),
        ],
    )

    assert done.preempted == [("second", "vip", "InPool")]


def test_the_fewest_victims_are_taken_when_one_big_one_would_do(run):
    done = run(
        [pool("p", within="LowerPriority", default={"cpu": 6})],
        [
            workload("big", "p", priority=0, cpu=4, admitted="default", created=0),
            workload("small", "p", priority=0, cpu=2, admitted="default", created=1),
            workload("vip", "p", priority=5, cpu=4, created=2),
        ],
    )

    assert done.preempted == [("big", "vip", "InPool")]


@pytest.mark.parametrize(
    ("policy", "victim_created", "preempted"),
    [
        pytest.param("LowerPriority", 5, [], id="lower-only-spares-equal"),
        pytest.param(
            "LowerOrNewerEqualPriority", 5, [("equal", "pending", "InPool")], id="newer-equal"
        ),
        pytest.param("LowerOrNewerEqualPriority", 0, [], id="older-equal-is-safe"),
        pytest.param("Never", 5, [], id="never"),
    ],
)
def test_equal_priority_is_preempted_only_when_newer_and_the_policy_says_so(
    run, policy, victim_created, preempted
):
    done = run(
        [pool("p", within=policy, default={"cpu": 2})],
        [
            workload("equal", "p", priority=3, cpu=2, admitted="default", created=victim_created),
            workload("pending", "p", priority=3, cpu=2, created=2),
        ],
    )

    assert done.preempted == preempted


def test_a_workload_never_preempts_to_fit_beyond_its_pools_nominal_quota(run):
    done = run(
        [
            pool("small", cohort="eng", within="LowerPriority", default={"cpu": 4}),
            pool("big", cohort="eng", default={"cpu": 4}),
        ],
        [
            workload("low", "small", priority=0, cpu=4, admitted="default"),
            workload("other", "big", priority=0, cpu=3, admitted="default"),
            workload("greedy", "small", priority=9, cpu=6, created=1),
        ],
    )

    assert done.preempted == []
    assert done.pending["greedy"]["reason"] == "InsufficientQuota"


def test_a_pool_reclaims_its_lent_quota_from_a_borrowing_neighbour(run):
    done = run(
        [
            pool("lender", cohort="eng", reclaim="Any", default={"cpu": 10}),
            pool("borrower", cohort="eng", default={"cpu": 10}),
        ],
        [
            workload("b1", "borrower", priority=5, cpu=10, admitted="default", created=0),
            workload("b2", "borrower", priority=5, cpu=6, admitted="default", created=1),
            workload("mine", "lender", priority=0, cpu=8, created=2),
        ],
    )

    assert done.preempted == [("b2", "mine", "InCohortReclamation")]
    assert {"b1", "mine"} <= set(done.admitted)


def test_reclaiming_only_lower_priority_spares_higher_priority_borrowers(run):
    done = run(
        [
            pool("lender", cohort="eng", reclaim="LowerPriority", default={"cpu": 10}),
            pool("borrower", cohort="eng", default={"cpu": 10}),
        ],
        [
            workload("b1", "borrower", priority=5, cpu=16, admitted="default"),
            workload("mine", "lender", priority=0, cpu=8, created=2),
        ],
    )

    assert done.preempted == []


def test_borrowed_quota_is_reclaimed_before_the_pools_own_lower_priority_work(run):
    done = run(
        [
            pool("a", cohort="eng", within="LowerPriority", reclaim="Any", default={"cpu": 10}),
            pool("b", cohort="eng", default={"cpu": 10}),
        ],
        [
            workload("own-low", "a", priority=0, cpu=6, admitted="default", created=0),
            workload("b-borrowing", "b", priority=9, cpu=14, admitted="default", created=1),
            workload("a-new", "a", priority=5, cpu=4, created=2),
        ],
    )

    assert done.preempted == [("b-borrowing", "a-new", "InCohortReclamation")]


def test_preempting_while_borrowing_takes_only_victims_under_the_threshold(run):
    done = run(
        [
            pool(
                "a",
                cohort="eng",
                reclaim="Any",
                borrow_policy="LowerPriority",
                threshold=1,
                default={"cpu": 2},
            ),
            pool("b", cohort="eng", default={"cpu": 10}),
        ],
        [
            workload("b-low", "b", priority=0, cpu=8, admitted="default", created=0),
            workload("b-high", "b", priority=5, cpu=4, admitted="default", created=1),
            workload("a-wants", "a", priority=10, cpu=6, created=2),
        ],
    )

    assert done.preempted == [("b-low", "a-wants", "InCohortReclaimWhileBorrowing")]
    assert "a-wants" in done.admitted


def test_a_preemptor_is_admitted_once_its_victims_released_their_quota(run):
    done = run(
        [pool("p", within="LowerPriority", default={"cpu": 2})],
        [
            workload("low", "p", priority=0, cpu=2, admitted="default"),
            workload("high", "p", priority=1, cpu=2, created=1),
        ],
    )

    assert done.admitted["high"]["podSets"] == [{"name": "main", "flavor": "default", "count": 1}]
    assert done.pending["low"]["message"].startswith("insufficient quota for cpu")


def test_released_quota_wakes_workloads_that_stepped_aside(run):
    done = run(
        [
            pool("a", cohort="eng", reclaim="Any", default={"cpu": 4}),
            pool("b", cohort="eng", default={"cpu": 4}),
        ],
        [
            workload("hog", "b", priority=0, cpu=8, admitted="default"),
            workload("a-first", "a", priority=5, cpu=4, created=1),
            workload("b-next", "b", priority=0, cpu=3, created=2),
        ],
    )

    assert ("hog", "a-first", "InCohortReclamation") in done.preempted
    assert {"a-first", "b-next"} <= set(done.admitted)


def test_a_victim_at_or_above_the_threshold_is_plain_reclamation_and_forbids_borrowing(run):
    done = run(
        [
            pool(
                "a",
                cohort="eng",
                reclaim="Any",
                borrow_policy="LowerPriority",
                threshold=0,
                default={"cpu": 4},
            ),
            pool("b", cohort="eng", default={"cpu": 4}),
        ],
        [
            workload("b-high", "b", priority=5, cpu=8, admitted="default"),
            workload("a-wants", "a", priority=10, cpu=4, created=1),
        ],
    )

    assert done.preempted == [("b-high", "a-wants", "InCohortReclamation")]
