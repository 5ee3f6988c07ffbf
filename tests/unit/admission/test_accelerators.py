"""Flavors with accelerators are kept for pod sets that ask for them: work that asks for no
accelerator goes to a flavor without one when one fits, and where it still lands on one, the
decision says so and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from asya.admission.accelerators import (
    AcceleratorFallback,
    AcceleratorFallbackCause,
    is_accelerator,
)
from asya.admission.model import load_scenario
from asya.admission.scheduler import simulate
from tests.factories import pool, workload

GPU_FIRST = {
    "h100": {"cpu": 64, "memory": "512Gi", "nvidia_com_gpu": 8},
    "cpu": {"cpu": 32, "memory": "128Gi"},
}


def only(flavors, wl):
    """`wl` with its one pod set restricted to `flavors`."""
    wl["podSets"][0]["flavors"] = list(flavors)
    return wl


def fallbacks(pools, workloads):
    """Each admitted workload's accelerator fallbacks, as the engine's result types carry them."""
    result = simulate(load_scenario({"pools": pools, "workloads": workloads}))
    return {a.workload: a.accelerator_fallbacks for a in result.admitted}


@pytest.mark.parametrize(
    ("resource", "accelerator"),
    [
        ("nvidia.com/gpu", True),
        ("amd.com/gpu", True),
        ("nvidia.com/mig-1g.5gb", True),
        ("habana.ai/gaudi", True),
        ("cpu", False),
        ("memory", False),
        ("ephemeral-storage", False),
        ("hugepages-2Mi", False),
        ("kubernetes.io/batch-cpu", False),
        ("node.kubernetes.io/thing", False),
    ],
)
def test_an_accelerator_is_any_extended_resource(resource, accelerator):
    assert is_accelerator(resource) is accelerator


def test_a_pod_set_asking_for_no_accelerator_takes_a_flavor_without_one_listed_later(run):
    done = run([pool("p", **GPU_FIRST)], [workload("web", "p", cpu=4, memory="8Gi")])

    assert done.flavor("web") == "cpu"
    assert "acceleratorFallbacks" not in done.admitted["web"]


def test_a_pod_set_asking_for_an_accelerator_still_takes_the_first_flavor_with_it(run):
    done = run([pool("p", **GPU_FIRST)], [workload("train", "p", cpu=4, nvidia_com_gpu=1)])

    assert done.flavor("train") == "h100"


def test_a_zero_accelerator_request_is_asking_for_none():
    got = fallbacks([pool("p", h100=GPU_FIRST["h100"])], [workload("web", "p", nvidia_com_gpu=0)])

    assert [f.cause for f in got["web"]] == [AcceleratorFallbackCause.NOT_COVERED]


def test_with_no_room_without_accelerators_it_lands_on_one_and_says_why():
    got = fallbacks(
        [pool("p", **GPU_FIRST)],
        [
            workload("filler", "p", cpu=32, admitted="cpu"),
            workload("web", "p", created=1, cpu=4),
        ],
    )

    assert got["web"] == (
        AcceleratorFallback(
            pod_set="main",
            flavor="h100",
            cause=AcceleratorFallbackCause.NO_ROOM,
            message="on h100: no flavor without accelerators (cpu) had room",
        ),
    )
    assert got["filler"] == ()


def test_it_prefers_fitting_on_an_accelerator_flavor_to_preempting_without_one(run):
    done = run(
        [pool("p", within="LowerPriority", **GPU_FIRST)],
        [
            workload("filler", "p", priority=0, cpu=32, admitted="cpu"),
            workload("web", "p", priority=9, created=1, cpu=4),
        ],
    )

    assert done.flavor("web") == "h100"
    assert done.preempted == []


def test_when_neither_kind_has_room_it_preempts_on_the_flavor_without_accelerators(run):
    done = run(
        [pool("p", within="LowerPriority", **GPU_FIRST)],
        [
            workload("gpu-filler", "p", priority=0, cpu=64, admitted="h100"),
            workload("cpu-filler", "p", priority=0, cpu=32, admitted="cpu"),
            workload("web", "p", priority=9, created=1, cpu=4),
        ],
    )

    assert done.preempted == [("cpu-filler", "web", "InPool")]
    assert done.flavor("web") == "cpu"


@pytest.mark.parametrize(
    ("flavors", "wl", "cause", "message"),
    [
        pytest.param(
            GPU_FIRST,
            only(["h100"], workload("web", "p", cpu=4)),
            AcceleratorFallbackCause.RESTRICTED,
            "on h100: pod set main may use only flavor h100",
            id="restricted-to-the-accelerator-flavor",
        ),
        pytest.param(
            {"h100": GPU_FIRST["h100"]},
            workload("web", "p", cpu=4, memory="1Gi"),
            AcceleratorFallbackCause.NOT_COVERED,
            "on h100: pool p has no flavor without accelerators covering cpu, memory",
            id="no-flavor-without-accelerators",
        ),
        pytest.param(
            {"h100": GPU_FIRST["h100"], "cpu": {"cpu": 32}},
            workload("web", "p", cpu=4, memory="1Gi"),
            AcceleratorFallbackCause.NOT_COVERED,
            "on h100: pool p has no flavor without accelerators covering cpu, memory",
            id="the-one-without-accelerators-lacks-memory",
        ),
        pytest.param(
            {"h100": GPU_FIRST["h100"]},
            workload("idle", "p") | {"name": "web"},
            AcceleratorFallbackCause.NOT_COVERED,
            "on h100: pool p has no flavor without accelerators",
            id="requesting-nothing-in-a-pool-of-accelerators",
        ),
    ],
)
def test_the_fallback_says_why_no_flavor_without_accelerators_could_serve(
    flavors, wl, cause, message
):
    got = fallbacks([pool("p", **flavors)], [wl])

    assert got["web"] == (AcceleratorFallback("main", "h100", cause, message),)


def test_quota_held_on_an_accelerator_flavor_from_before_is_reported_as_held():
    got = fallbacks([pool("p", **GPU_FIRST)], [workload("web", "p", cpu=4, admitted="h100")])

    assert got["web"] == (
        AcceleratorFallback(
            "main", "h100", AcceleratorFallbackCause.HELD, "on h100: admitted there earlier"
        ),
    )


def test_the_simulate_output_lists_the_fallbacks_of_a_workload(run):
    done = run(
        [pool("p", **GPU_FIRST)],
        [workload("filler", "p", cpu=32, admitted="cpu"), workload("web", "p", created=1, cpu=4)],
    )

    assert done.admitted["web"]["acceleratorFallbacks"] == [
        {
            "podSet": "main",
            "flavor": "h100",
            "cause": "NoRoom",
            "message": "on h100: no flavor without accelerators (cpu) had room",
        }
    ]


def test_a_gangs_cpu_member_goes_without_accelerators_while_its_gpu_members_take_them(run):
    gang = workload("ddp", "p")
    gang["podSets"] = [
        {"name": "trainer", "count": 4, "requests": {"nvidia.com/gpu": 1, "cpu": 8}},
        {"name": "coordinator", "count": 1, "requests": {"cpu": 2}},
    ]

    done = run([pool("p", **GPU_FIRST)], [gang])

    assert done.admitted["ddp"]["podSets"] == [
        {"name": "trainer", "flavor": "h100", "count": 4},
        {"name": "coordinator", "flavor": "cpu", "count": 1},
    ]


def test_the_admission_page_names_every_cause_and_nothing_else():
    page = Path(__file__).resolve().parents[3] / "docs" / "admission.md"
    lines = page.read_text(encoding="utf-8").splitlines()
    start = lines.index("| cause | message, e.g. |") + 2
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))

    documented = [row.split("|")[1].strip().strip("`") for row in lines[start:end]]

    assert sorted(documented) == sorted(cause.value for cause in AcceleratorFallbackCause)


def test_a_flavor_listing_an_accelerator_at_nominal_zero_is_one_without_accelerators(run):
    # Kueue asks every flavor of a resource group to list each resource: a CPU flavor says
    # nvidia.com/gpu: 0. It offers no GPU, so a CPU pod set prefers it and needs no fallback.
    kueue_style = {
        "h100": {"cpu": 64, "memory": "512Gi", "nvidia_com_gpu": 8},
        "cpu": {"cpu": 4, "memory": "16Gi", "nvidia_com_gpu": 0},
    }

    done = run([pool("p", **kueue_style)], [workload("web", "p", cpu=1)])

    assert done.flavor("web") == "cpu"
    assert "acceleratorFallbacks" not in done.admitted["web"]


def test_a_flavor_where_a_pool_may_borrow_gpus_still_offers_them(run):
    # team-a owns no GPU in h100 but may borrow team-b's: h100 is a GPU flavor to it, and its
    # CPU work keeps to the cpu flavor listed after it.
    flavors_a = {
        "h100": {"cpu": 64, "nvidia_com_gpu": 0},
        "cpu": {"cpu": 32},
    }
    pools = [
        pool("team-a", cohort="eng", **flavors_a),
        pool("team-b", cohort="eng", h100={"cpu": 64, "nvidia_com_gpu": 8}),
    ]

    done = run(pools, [workload("web", "team-a", cpu=4)], cohorts=[{"name": "eng"}])

    assert done.flavor("web") == "cpu"
