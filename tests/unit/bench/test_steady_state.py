"""Utilisation arithmetic: the steady-state window of completions, rates and the share."""

from __future__ import annotations

import pytest

from bench.steady import steady_window
from bench.utilisation import (
    UtilisationPlan,
    cases,
    items_for,
    share,
    standalone_per_s,
)


def test_the_window_runs_from_the_10th_to_the_90th_percentile_completion():
    # Eleven completions: a slow start (0 to 5 s), one a second, then a slow tail.
    completions = [0.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 30.0]

    window = steady_window(completions)

    assert (window.items, window.seconds, window.per_s) == (8, 8.0, 1.0)


def test_completions_may_come_in_any_order():
    window = steady_window([13.0, 30.0, 6.0, 0.0, 5.0, 12.0, 7.0, 11.0, 8.0, 10.0, 9.0])

    assert (window.items, window.seconds) == (8, 8.0)


def test_a_window_of_other_percentiles():
    window = steady_window([0.0, 1.0, 2.0, 3.0, 4.0], low=0.25, high=0.75)

    assert (window.items, window.seconds) == (2, 2.0)


@pytest.mark.parametrize(
    "completions",
    [[], [1.0], [2.0, 2.0, 2.0]],
    ids=["none", "one", "all-at-once"],
)
def test_completions_that_span_no_time_have_no_rate(completions):
    with pytest.raises(ValueError, match="completion"):
        steady_window(completions)


def test_the_standalone_rate_counts_every_item_of_every_call():
    assert standalone_per_s(calls=200, batch=32, elapsed_s=1.25) == 5120.0


@pytest.mark.parametrize(
    ("asya_per_s", "standalone", "expected"),
    [(3200.0, 6400.0, 0.5), (800.0, 800.0, 1.0), (1000.0, 3000.0, 0.333)],
    ids=["half", "all", "rounded-to-three-places"],
)
def test_the_share_is_asya_over_standalone(asya_per_s, standalone, expected):
    assert share(asya_per_s, standalone) == expected


@pytest.mark.parametrize(
    ("standalone", "seconds", "batch", "expected"),
    [
        (6400.0, 3.0, 32, 19200),
        (6300.0, 3.0, 32, 18912),
        (2500.0, 3.0, 1, 7500),
        (8.0, 1.0, 32, 320),
    ],
    ids=["whole-batches", "rounded-up-to-a-batch", "batch-1", "at-least-ten-batches"],
)
def test_a_queue_holds_the_seconds_of_device_work_in_whole_batches(
    standalone, seconds, batch, expected
):
    assert items_for(standalone, seconds, batch) == expected


def plan(paths: tuple[str, ...]) -> UtilisationPlan:
    return UtilisationPlan(
        paths=paths,
        device_ms=5.0,
        call_ms=0.3,
        pods_device_ms=40.0,
        seconds=3.0,
        queue_type="quorum",
        payload_bytes=256,
        timeout_s=300.0,
        pipeline_depth=None,
    )


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        (("local", "pods"), [("local", 32, 5.0), ("local", 1, 0.3), ("pods", 32, 40.0)]),
        (("pods",), [("pods", 32, 40.0)]),
        (("pods", "local"), [("local", 32, 5.0), ("local", 1, 0.3), ("pods", 32, 40.0)]),
    ],
    ids=["both", "pods-only", "local-first-whatever-the-order"],
)
def test_each_path_gives_its_rows(paths, expected):
    rows = cases(plan(paths))

    assert [(c.path, c.batch, c.device_ms) for c in rows] == expected


def test_each_row_sets_the_device_time_of_its_own_handler():
    rows = cases(plan(("local", "pods")))

    assert [c.env for c in rows] == [
        {"BENCH_DEVICE_BATCH_MS": "5"},
        {"BENCH_DEVICE_ONE_MS": "0.3"},
        {"BENCH_DEVICE_BATCH_MS": "40"},
    ]
