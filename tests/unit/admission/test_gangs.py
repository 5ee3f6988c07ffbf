"""Gangs: all pod sets at full count or nothing; minCount allows the largest count that fits."""

from __future__ import annotations

import pytest

from tests.factories import pool, workload


@pytest.mark.parametrize(("free", "admitted"), [(3, False), (4, True)])
def test_a_gang_of_four_is_admitted_whole_or_not_at_all(run, free, admitted):
    done = run(
        [pool("gpus", h100={"nvidia_com_gpu": 8})],
        [
            workload("busy", "gpus", count=8 - free, nvidia_com_gpu=1, admitted="h100"),
            workload("gang", "gpus", count=4, created=1, nvidia_com_gpu=1),
        ],
    )

    assert ("gang" in done.admitted) is admitted
    if admitted:
        assert done.counts("gang") == {"main": 4}
    else:
        assert "needs 4, pool gpus has 3 unused" in done.pending["gang"]["message"]


def test_every_pod_set_of_a_gang_is_admitted_together(run):
    gang = {
        "name": "trainer",
        "pool": "gpus",
        "podSets": [
            {"name": "driver", "count": 1, "requests": {"cpu": 4}},
            {"name": "worker", "count": 3, "requests": {"cpu": 2, "nvidia.com/gpu": 1}},
        ],
    }
    too_big = {
        **gang,
        "name": "too-big",
        "created": 1,
        "podSets": [gang["podSets"][0], {**gang["podSets"][1], "count": 6}],
    }

    done = run([pool("gpus", h100={"cpu": 32, "nvidia_com_gpu": 4})], [gang, too_big])

    assert done.counts("trainer") == {"driver": 1, "worker": 3}
    assert "too-big" not in done.admitted


def test_pod_sets_of_one_workload_count_against_each_other(run):
    two_halves = {
        "name": "halves",
        "pool": "p",
        "podSets": [
            {"name": "a", "count": 3, "requests": {"cpu": 1}},
            {"name": "b", "count": 3, "requests": {"cpu": 1}},
        ],
    }

    done = run([pool("p", default={"cpu": 5})], [two_halves])

    assert "halves" not in done.admitted
    assert "needs 6" in done.pending["halves"]["message"]


def test_with_min_count_the_largest_count_that_fits_is_admitted(run):
    done = run(
        [pool("gpus", h100={"nvidia_com_gpu": 8})],
        [
            workload("busy", "gpus", count=3, nvidia_com_gpu=1, admitted="h100"),
            workload("elastic", "gpus", count=8, min_count=2, created=1, nvidia_com_gpu=1),
        ],
    )

    assert done.counts("elastic") == {"main": 5}


def test_with_min_count_too_little_room_is_still_nothing(run):
    done = run(
        [pool("gpus", h100={"nvidia_com_gpu": 8})],
        [
            workload("busy", "gpus", count=7, nvidia_com_gpu=1, admitted="h100"),
            workload("elastic", "gpus", count=8, min_count=2, created=1, nvidia_com_gpu=1),
        ],
    )

    assert "elastic" not in done.admitted


def test_a_gang_that_fits_nowhere_says_which_flavor_lacks_what(run):
    done = run(
        [pool("gpus", a100={"nvidia_com_gpu": 2}, h100={"nvidia_com_gpu": 2})],
        [workload("gang", "gpus", count=4, nvidia_com_gpu=1)],
    )

    assert done.pending["gang"]["message"] == (
        "insufficient quota for nvidia.com/gpu in flavor a100: needs 4,"
        " more than pool gpus can ever have (2)"
    )
