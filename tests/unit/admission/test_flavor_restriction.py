"""A pod set restricted to some of its pool's flavors (`flavors`): an actor's replicas share
one node selector, so they must all land in one flavor."""

from __future__ import annotations

import pytest

from asya.admission.model import load_scenario
from asya.errors import AdmissionError
from tests.factories import pool, workload


def only(flavors, wl):
    """`wl` with its one pod set restricted to `flavors`."""
    wl["podSets"][0]["flavors"] = list(flavors)
    return wl


def test_a_restricted_pod_set_skips_a_flavor_with_room_for_the_one_it_may_use(run):
    done = run(
        [pool("team-a", a={"cpu": 10}, b={"cpu": 10})],
        [only(["b"], workload("w", "team-a", count=4, cpu=1))],
    )

    assert done.flavor("w") == "b"


def test_a_restricted_pod_set_waits_rather_than_take_another_flavor_with_room(run):
    done = run(
        [pool("team-a", a={"cpu": 10}, b={"cpu": 10})],
        [
            workload("running", "team-a", count=10, cpu=1, admitted="b"),
            only(["b"], workload("w", "team-a", count=1, cpu=1)),
        ],
    )

    assert "w" not in done.admitted
    assert done.pending["w"]["message"].startswith(
        "insufficient quota for cpu in flavor b: needs 1, pool team-a has 0 unused"
    )


def test_a_restricted_pod_set_takes_the_first_of_its_flavors_in_the_pools_order(run):
    done = run(
        [pool("team-a", a={"cpu": 10}, b={"cpu": 10}, c={"cpu": 10})],
        [only(["c", "b"], workload("w", "team-a", count=2, cpu=1))],
    )

    assert done.flavor("w") == "b"


def test_an_unrestricted_pod_set_still_takes_the_first_flavor_that_fits(run):
    done = run(
        [pool("team-a", a={"cpu": 10}, b={"cpu": 10})],
        [workload("w", "team-a", count=2, cpu=1)],
    )

    assert done.flavor("w") == "a"


def test_a_pool_without_any_of_the_flavors_says_which_it_lacks_and_which_it_has(run):
    done = run(
        [pool("team-a", a={"cpu": 10}, b={"cpu": 10})],
        [only(["h100", "a100"], workload("w", "team-a", count=1, cpu=1))],
    )

    assert done.pending["w"] == {
        "workload": "w",
        "reason": "InsufficientQuota",
        "message": "pod set 'main': may use only flavor h100, a100, which pool team-a does not"
        " have (it has: a, b)",
    }


def test_a_restricted_pod_set_preempts_only_in_a_flavor_it_may_use(run):
    # Unrestricted, "high" would preempt in a, the first flavor where preemption makes room.
    done = run(
        [pool("team-a", within="LowerPriority", a={"cpu": 4}, b={"cpu": 4})],
        [
            workload("in-a", "team-a", count=4, cpu=1, priority=7, admitted="a"),
            workload("in-b", "team-a", count=4, cpu=1, priority=5, admitted="b"),
            only(["b"], workload("high", "team-a", count=1, cpu=1, priority=10)),
        ],
    )

    assert done.preempted == [("in-b", "high", "InPool")]
    assert done.flavor("high") == "b"


@pytest.mark.parametrize(
    ("flavors", "admitted", "error"),
    [
        ([], None, "flavors is empty; name at least one flavor, or leave it out for any"),
        (["b"], "a", "is admitted to flavor 'a', outside the flavors it may use (b)"),
    ],
    ids=["empty", "admitted-elsewhere"],
)
def test_the_loader_refuses_flavors_it_could_never_honour(flavors, admitted, error):
    raw = {
        "pools": [pool("team-a", a={"cpu": 10}, b={"cpu": 10})],
        "workloads": [only(flavors, workload("w", "team-a", cpu=1, admitted=admitted))],
    }

    with pytest.raises(AdmissionError, match="flavor") as caught:
        load_scenario(raw)

    assert error in str(caught.value)


def test_the_loader_reads_flavors_from_the_wire():
    raw = {
        "pools": [pool("team-a", a={"cpu": 10})],
        "workloads": [only(["a"], workload("w", "team-a", cpu=1))],
    }

    (wl,) = load_scenario(raw).workloads

    assert wl.pod_sets[0].flavors == ("a",)
