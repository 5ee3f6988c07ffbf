"""The benchmark's ratios compare asya with each other contender on the same queue type only."""

from __future__ import annotations

from bench.report import ratios


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
