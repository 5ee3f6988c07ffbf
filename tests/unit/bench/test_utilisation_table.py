"""The utilisation runs in the bench's printed table, and in its exit code."""

from __future__ import annotations

from bench.cli import succeeded
from bench.report import table, utilisation


def row(path: str, transport: str, batch: int, device_ms: float, **measured):
    return {
        "path": path,
        "transport": transport,
        "batch": batch,
        "device_ms": device_ms,
        **measured,
    }


def measured_row(path, transport, batch, device_ms, standalone, asya, share):
    return row(
        path,
        transport,
        batch,
        device_ms,
        standalone_per_s=standalone,
        asya_per_s=asya,
        share=share,
        delivery={"sent": 100, "arrived": 100, "failed": 0},
    )


def measured(rows, depth=None):
    return {
        "pipeline_depth": depth,
        "steady_window": [0.1, 0.9],
        "seconds_queued": 3.0,
        "batch_wait_ms": 10,
        "pods_queue_type": "quorum",
        "rows": rows,
    }


def test_each_run_is_a_row_with_both_rates_and_the_share():
    rows = [
        measured_row("local", "memory", 32, 5.0, 6250.4, 3657.9, 0.585),
        measured_row("local", "memory", 1, 0.3, 2498.1, 1025.3, 0.41),
        measured_row("pods", "rabbitmq-quorum", 32, 40.0, 796.4, 551.6, 0.693),
    ]

    lines = utilisation(measured(rows))

    assert lines == [
        "device utilisation: items/s of the device-bound handler alone (a plain loop) and"
        " through asya, in steady state (completions 10% to 90%); ASYA_PIPELINE_DEPTH unset:",
        "  path                       batch device ms standalone/s    asya/s  share",
        "  local GPU worker (memory)     32         5       6250.4    3657.9   0.58",
        "  local GPU worker (memory)      1       0.3       2498.1    1025.3   0.41",
        "  pod (rabbitmq-quorum)         32        40        796.4     551.6   0.69",
    ]


def test_the_pipeline_depth_found_in_the_environment_is_shown():
    lines = utilisation(measured([], depth="0"))

    assert lines[0].endswith("ASYA_PIPELINE_DEPTH 0:")


def test_a_failed_run_shows_the_first_line_of_its_error():
    failed = row("pods", "rabbitmq-quorum", 32, 40.0, error="12 of 2400 arrived\nlogs...")

    lines = utilisation(measured([failed]))

    assert lines[-1] == "  pod (rabbitmq-quorum)         32        40 FAILED: 12 of 2400 arrived"


def results(rows):
    return {
        "settings": {
            "hops": 3,
            "payload_bytes": 256,
            "inflight_per_hop": 16,
            "saturation_messages": 3000,
            "light_rates_per_s": [20.0],
        },
        "asya": {"commit": "9e57ed4abc1234", "dirty": False},
        "machine": {"cpus": 2},
        "broker": {"version": "3.10.8"},
        "skipped": {},
        "runs": [],
        "ratios": {},
        "batching": {},
        "utilisation": measured(rows),
    }


def test_a_run_of_only_the_utilisation_prints_only_its_table_under_the_heading():
    rows = [measured_row("local", "memory", 32, 5.0, 6250.4, 3657.9, 0.585)]

    printed = table(results(rows)).splitlines()

    assert printed[1:] == ["", *utilisation(measured(rows))]


def test_a_failed_utilisation_run_fails_the_bench():
    rows = [
        measured_row("local", "memory", 32, 5.0, 6250.4, 3657.9, 0.585),
        row("pods", "rabbitmq-quorum", 32, 40.0, error="a process exited"),
    ]

    assert succeeded(results(rows)) is False


def test_a_utilisation_run_that_lost_items_fails_the_bench():
    lost = measured_row("local", "memory", 32, 5.0, 6250.4, 3657.9, 0.585)
    lost["delivery"] = {"sent": 100, "arrived": 99, "failed": 1}

    assert succeeded(results([lost])) is False


def test_utilisation_runs_that_delivered_everything_pass():
    rows = [measured_row("local", "memory", 32, 5.0, 6250.4, 3657.9, 0.585)]

    assert succeeded(results(rows)) is True
