"""`python -m bench` options that choose, skip and size the utilisation runs."""

from __future__ import annotations

import pytest

from bench.cli import config_from, parser


def config(*argv: str):
    return config_from(parser().parse_args(list(argv)))


def test_by_default_both_paths_run_at_the_default_device_times():
    plan = config().utilisation

    assert plan is not None
    assert (plan.paths, plan.device_ms, plan.call_ms, plan.pods_device_ms, plan.seconds) == (
        ("local", "pods"),
        5.0,
        0.3,
        40.0,
        3.0,
    )


def test_one_path_can_be_chosen():
    plan = config("--utilisation", "pods").utilisation

    assert plan is not None
    assert plan.paths == ("pods",)


@pytest.mark.parametrize("empty", ["", ",", " "], ids=["empty", "comma", "blank"])
def test_an_empty_list_skips_the_utilisation_runs(empty):
    assert config("--utilisation", empty).utilisation is None


def test_an_unknown_path_is_a_usage_error_naming_the_choices(capsys):
    with pytest.raises(SystemExit) as exited:
        config("--utilisation", "local,gpu")

    assert exited.value.code == 2
    assert "unknown utilisation path: gpu; choose from local, pods" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["0", "-1", "fast"], ids=["zero", "negative", "not-a-number"])
def test_a_device_time_must_be_a_number_above_zero(bad):
    with pytest.raises(SystemExit):
        config("--device-ms", bad)


def test_device_times_and_queued_seconds_are_taken_as_given():
    plan = config(
        "--device-ms",
        "2.5",
        "--device-call-ms",
        "1",
        "--pods-device-ms",
        "80",
        "--utilisation-seconds",
        "1.5",
    ).utilisation

    assert plan is not None
    assert (plan.device_ms, plan.call_ms, plan.pods_device_ms, plan.seconds) == (
        2.5,
        1.0,
        80.0,
        1.5,
    )


def test_the_pods_run_on_the_first_queue_type():
    plan = config("--queue-types", "classic,quorum").utilisation

    assert plan is not None
    assert plan.queue_type == "classic"


def test_no_contenders_and_no_batching_leaves_only_the_utilisation_runs():
    chosen = config("--contenders", "", "--batch-sizes", "")

    assert (chosen.contenders, chosen.batching, chosen.utilisation is not None) == ((), None, True)


def test_the_pipeline_depth_in_the_environment_is_recorded(monkeypatch):
    monkeypatch.setenv("ASYA_PIPELINE_DEPTH", "0")

    plan = config().utilisation

    assert plan is not None
    assert plan.pipeline_depth == "0"


def test_an_unset_pipeline_depth_is_recorded_as_none():
    plan = config().utilisation

    assert plan is not None
    assert plan.pipeline_depth is None
