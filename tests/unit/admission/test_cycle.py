"""The order of a cycle and the two queueing strategies."""

from __future__ import annotations

from asya.admission.model import load_scenario
from asya.admission.scheduler import Scheduler
from tests.factories import pool, workload


def test_strict_fifo_blocks_the_pool_behind_a_head_that_does_not_fit(run):
    done = run(
        [pool("p", strategy="StrictFIFO", default={"cpu": 5})],
        [
            workload("wl1", "p", priority=100, cpu=2),
            workload("wl2", "p", priority=10, cpu=5),
            workload("wl3", "p", priority=1, cpu=1),
        ],
    )

    assert set(done.admitted) == {"wl1"}
    assert done.pending["wl2"]["reason"] == "InsufficientQuota"
    assert done.pending["wl3"]["reason"] == "QueuedBehindHead"
    assert "its head wl2 does not fit" in done.pending["wl3"]["message"]


def test_best_effort_fifo_moves_on_past_a_head_that_does_not_fit(run):
    done = run(
        [pool("p", default={"cpu": 5})],
        [
            workload("wl1", "p", priority=100, cpu=2),
            workload("wl2", "p", priority=10, cpu=5),
            workload("wl3", "p", priority=1, cpu=1),
        ],
    )

    assert set(done.admitted) == {"wl1", "wl3"}
    assert set(done.pending) == {"wl2"}


def test_within_a_pool_higher_priority_goes_first_then_older(run):
    done = run(
        [pool("p", strategy="StrictFIFO", default={"cpu": 2})],
        [
            workload("old-low", "p", priority=0, created=1, cpu=1),
            workload("new-high", "p", priority=5, created=9, cpu=1),
            workload("older-low", "p", priority=0, created=0, cpu=1),
        ],
    )

    assert set(done.admitted) == {"new-high", "older-low"}


def test_in_a_cycle_non_borrowing_entries_go_before_borrowing_ones_of_higher_priority():
    scenario = load_scenario(
        {
            "pools": [
                pool("a", cohort="eng", default={"cpu": 5}),
                pool("b", cohort="eng", default={"cpu": 5}),
            ],
            "workloads": [
                workload("borrower", "a", priority=100, cpu=7),
                workload("modest", "b", priority=0, cpu=5),
            ],
        }
    )
    scheduler = Scheduler(scenario)

    first = scheduler.cycle()

    assert first.admitted == ["modest"]
    assert "borrower" not in scheduler.holding


def test_an_entry_rechecks_what_earlier_entries_took_in_the_same_cycle():
    scenario = load_scenario(
        {
            "pools": [
                pool("a", cohort="eng", default={"cpu": 4}),
                pool("b", cohort="eng", default={"cpu": 4}),
            ],
            "workloads": [
                workload("first", "a", priority=9, cpu=6),
                workload("second", "b", priority=1, cpu=6),
            ],
        }
    )
    scheduler = Scheduler(scenario)

    first = scheduler.cycle()

    assert first.admitted == ["first"]
    assert "second" not in scheduler.holding


def test_a_run_ends_when_a_cycle_changes_nothing(run):
    done = run(
        [pool("p", default={"cpu": 1})],
        [workload("a", "p", cpu=1), workload("b", "p", cpu=1, created=1)],
    )

    assert done.raw["quiescent"] is True
    assert done.raw["cycles"] == 3  # admit a; set b aside; nothing left to do


def test_a_cycle_limit_stops_the_run_and_says_so(run):
    done = run(
        [pool("p", default={"cpu": 9})],
        [workload(f"w{i}", "p", cpu=1, created=i) for i in range(5)],
        cycles=2,
    )

    assert done.raw["quiescent"] is False
    assert len(done.admitted) == 2
    assert done.pending["w4"]["reason"] == "NotEvaluated"


def test_among_borrowing_entries_the_one_borrowing_closest_to_its_pool_goes_before_priority():
    # Kueue's "in a hierarchical cohort, workload borrowing less is scheduled first"
    # (pkg/scheduler/scheduler_test.go, TestSchedule): cohort `guaranteed` holds 4 cpu under
    # `root`; pool `guaranteed` borrows them one level up, pool `best-effort` from the root.
    cohorts = [
        {"name": "root"},
        {
            "name": "guaranteed",
            "parent": "root",
            "quotas": [{"flavor": "default", "resources": {"cpu": {"nominal": 4}}}],
        },
    ]
    scenario = load_scenario(
        {
            "cohorts": cohorts,
            "pools": [
                pool("guaranteed", cohort="guaranteed", default={"cpu": 0}),
                pool("best-effort", cohort="root", default={"cpu": 0}),
            ],
            "workloads": [
                workload("guaranteed", "guaranteed", priority=0, cpu=4),
                workload("best-effort", "best-effort", priority=3, cpu=4),
            ],
        }
    )
    scheduler = Scheduler(scenario)

    first = scheduler.cycle()

    assert first.admitted == ["guaranteed"]
    assert "best-effort" not in scheduler.holding
