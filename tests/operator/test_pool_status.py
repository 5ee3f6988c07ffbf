"""A ResourcePool's status after a pass: usage, borrowed and lent per flavor and resource."""

from __future__ import annotations

from asya_operator.plans.admission import admit
from asya_operator.plans.pool_status import plan_pool_statuses, pool_usage
from asya_operator.plans.quota import lending

from tests.operator.test_admission_pass import actor, pool


def statuses(pools, actors):
    used = pool_usage(pools, actors, (), admit(pools, (), {}, actors))
    return plan_pool_statuses(pools, used, lending(pools, used.usage))


def resources(status, flavor="h100"):
    (found,) = [f for f in status["flavorsUsage"] if f["flavor"] == flavor]
    return {r["name"]: (r["usage"], r["borrowed"], r["lent"]) for r in found["resources"]}


def test_usage_counts_the_admitted_replicas_and_pending_the_rest():
    pools = [pool("team-a", h100={"nvidia_com_gpu": 2, "cpu": 8})]
    actors = [actor("embed", desired=5, cpu="1500m")]

    (status,) = statuses(pools, actors).values()

    assert resources(status) == {"nvidia.com/gpu": ("2", "0", "0"), "cpu": ("3", "0", "0")}
    assert (status["admittedWorkloads"], status["pendingWorkloads"]) == (2, 3)


def test_a_borrowing_pool_shows_borrowed_and_its_lender_lent():
    pools = [
        pool("team-a", cohort="eng", h100={"nvidia_com_gpu": 1}),
        pool("team-b", cohort="eng", h100={"nvidia_com_gpu": 2}),
    ]
    actors = [actor("embed", "team-a", desired=3)]

    found = statuses(pools, actors)

    assert resources(found["team-a"]) == {"nvidia.com/gpu": ("3", "2", "0")}
    assert resources(found["team-b"]) == {"nvidia.com/gpu": ("0", "0", "2")}
    assert found["team-b"]["admittedWorkloads"] == 0


def test_an_idle_pool_reports_zeros_for_every_quota_it_has():
    pools = [pool("team-a", h100={"nvidia_com_gpu": 2}, a100={"nvidia_com_gpu": 1})]

    (status,) = statuses(pools, []).values()

    assert [f["flavor"] for f in status["flavorsUsage"]] == ["h100", "a100"]
    assert resources(status, "a100") == {"nvidia.com/gpu": ("0", "0", "0")}
    assert (status["admittedWorkloads"], status["pendingWorkloads"]) == (0, 0)


def test_a_pool_whose_nominal_quota_cannot_be_read_still_gets_its_usage_written():
    # Its Active condition says why (test_pool_active); the other pools' statuses are written.
    pools = [pool("odd", h100={"nvidia_com_gpu": "1e400"}), pool("team-a", h100={"cpu": 1})]

    found = statuses(pools, [])

    assert resources(found["odd"]) == {"nvidia.com/gpu": ("0", "0", "0")}
    assert resources(found["team-a"]) == {"cpu": ("0", "0", "0")}
