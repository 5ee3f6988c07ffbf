"""The benchmark's ratios compare asya with each other contender on the same queue type only."""

from __future__ import annotations

from bench.cli import rotated
from bench.report import ratio_rounds, ratios


def run(contender: str, queue_type: str, per_s: float) -> dict[str, object]:
    return {"contender": contender, "queue_type": queue_type, "saturation": {"per_s": per_s}}


def test_each_asya_contender_is_divided_by_each_other_contender_of_its_queue_type():
    runs = [
        run("asya-pods", "quorum", 100.0),
        run("asya-serve", "quorum", 200.0),
        run("raw-aio-pika", "quorum", 400.0),
        run("asya-pods", "classic", 300.0),
        run("dramatiq", "classic", 150.0),
    ]

    assert ratios(runs) == {
        "quorum": {
            "asya-pods / asya-serve": 0.5,
            "asya-pods / raw-aio-pika": 0.25,
            "asya-serve / raw-aio-pika": 0.5,
        },
        "classic": {"asya-pods / dramatiq": 2.0},
    }


def test_a_contender_that_failed_is_left_out_of_the_ratios():
    runs = [
        run("asya-pods", "quorum", 100.0),
        {"contender": "celery", "queue_type": "quorum", "error": "celery: a process exited"},
    ]

    assert ratios(runs) == {}


def test_over_rounds_each_ratio_divides_runs_of_one_round_and_the_median_is_reported():
    runs = [
        {**run("asya-pods", "quorum", 100.0), "round": 0},
        {**run("raw-aio-pika", "quorum", 200.0), "round": 0},
        {**run("raw-aio-pika", "quorum", 100.0), "round": 1},
        {**run("asya-pods", "quorum", 90.0), "round": 1},
        {**run("asya-pods", "quorum", 300.0), "round": 2},
        {**run("raw-aio-pika", "quorum", 400.0), "round": 2},
    ]

    assert ratio_rounds(runs) == {"quorum": {"asya-pods / raw-aio-pika": [0.5, 0.9, 0.75]}}
    assert ratios(runs) == {"quorum": {"asya-pods / raw-aio-pika": 0.75}}


def test_a_round_where_one_side_failed_gives_no_ratio_for_its_pairs():
    runs = [
        {**run("asya-pods", "quorum", 100.0), "round": 0},
        {**run("dramatiq", "quorum", 50.0), "round": 0},
        {"contender": "dramatiq", "queue_type": "quorum", "error": "exited", "round": 1},
        {**run("asya-pods", "quorum", 100.0), "round": 1},
    ]

    assert ratio_rounds(runs) == {"quorum": {"asya-pods / dramatiq": [2.0]}}


def test_each_round_starts_one_contender_later():
    names = ["asya-pods", "raw-aio-pika", "dramatiq"]

    assert [rotated(names, r) for r in range(4)] == [
        ["asya-pods", "raw-aio-pika", "dramatiq"],
        ["raw-aio-pika", "dramatiq", "asya-pods"],
        ["dramatiq", "asya-pods", "raw-aio-pika"],
        ["asya-pods", "raw-aio-pika", "dramatiq"],
    ]
