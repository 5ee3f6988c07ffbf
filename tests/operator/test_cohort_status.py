"""A Cohort's status after a pass: usage, borrowed and lent per flavor and resource of its
subtree; and what the pools lend when cohorts own quota or sit below other cohorts."""

from __future__ import annotations

from typing import Any

import msgspec
from asya_operator.api.pool import Cohort
from asya_operator.plans.admission import admit
from asya_operator.plans.cohort_status import plan_cohort_statuses
from asya_operator.plans.pool_status import plan_pool_statuses, pool_usage
from asya_operator.plans.quota import lending, lent

from tests.operator.test_admission_pass import actor, pool


def cohort(name: str, parent: str | None = None, **gpus_by_flavor: int) -> Cohort:
    spec: dict[str, Any] = {"parent": parent}
    if gpus_by_flavor:
        spec["quotas"] = [
            {"flavor": flavor, "resources": [{"name": "nvidia.com/gpu", "nominal": gpus}]}
            for flavor, gpus in gpus_by_flavor.items()
        ]
    return msgspec.convert({"metadata": {"name": name}, "spec": spec}, Cohort)


def passed(pools, cohorts, actors):
    """The pools' and the cohorts' statuses after one pass, as (usage, borrowed, lent) per
    flavor and resource, by name."""
    used = pool_usage(pools, actors, (), admit(pools, cohorts, {}, actors))
    found = lending(pools, used.usage, cohorts)
    written = plan_cohort_statuses(cohorts, found)
    return (
        _read(plan_pool_statuses(pools, used, found)),
        _read({name: patch.document() for name, patch in written.items()}),
    )


def _read(statuses: dict[str, dict[str, Any]]) -> dict[str, dict[tuple[str, str], tuple]]:
    return {
        name: {
            (f["flavor"], r["name"]): (r["usage"], r["borrowed"], r["lent"])
            for f in status["flavorsUsage"]
            for r in f["resources"]
        }
        for name, status in statuses.items()
    }


GPU = ("h100", "nvidia.com/gpu")


def test_a_root_cohort_shows_its_pools_usage_and_neither_borrows_nor_lends():
    pools = [
        pool("team-a", cohort="eng", h100={"nvidia_com_gpu": 1}),
        pool("team-b", cohort="eng", h100={"nvidia_com_gpu": 2}),
    ]
    actors = [actor("embed", "team-a", desired=3)]

    found_pools, found_cohorts = passed(pools, [cohort("eng")], actors)

    assert found_cohorts == {"eng": {GPU: ("3", "0", "0")}}
    assert found_pools["team-a"] == {GPU: ("3", "2", "0")}
    assert found_pools["team-b"] == {GPU: ("0", "0", "2")}


def test_a_cohort_below_another_borrows_from_it_and_its_lenders_say_so():
    # org owns 2 GPUs and has pool ops (2); eng, below org, has team-a (1) and team-b (1).
    pools = [
        pool("team-a", cohort="eng", h100={"nvidia_com_gpu": 1}),
        pool("team-b", cohort="eng", h100={"nvidia_com_gpu": 1}),
        pool("ops", cohort="org", h100={"nvidia_com_gpu": 2}),
    ]
    cohorts = [cohort("eng", parent="org"), cohort("org", h100=2)]
    actors = [actor("embed", "team-a", desired=5)]

    found_pools, found_cohorts = passed(pools, cohorts, actors)

    # eng's subtree has 2 and uses 5: 3 from org, which takes 2 of them from its own quota
    # and 1 from ops' unused quota.
    assert found_cohorts == {"eng": {GPU: ("5", "3", "0")}, "org": {GPU: ("5", "0", "0")}}
    assert found_pools == {
        "team-a": {GPU: ("5", "4", "0")},
        "team-b": {GPU: ("0", "0", "1")},
        "ops": {GPU: ("0", "0", "1")},
    }


def test_a_cohorts_own_quota_is_lent_before_its_pools_unused_quota():
    pools = [
        pool("team-a", cohort="eng", h100={"nvidia_com_gpu": 1}),
        pool("team-b", cohort="eng", h100={"nvidia_com_gpu": 2}),
    ]
    actors = [actor("embed", "team-a", desired=2)]

    found_pools, found_cohorts = passed(pools, [cohort("eng", h100=1)], actors)

    assert found_pools["team-b"] == {GPU: ("0", "0", "0")}
    assert found_cohorts == {"eng": {GPU: ("2", "0", "0")}}


def test_an_idle_cohort_reports_zeros_for_every_flavor_of_its_subtree():
    pools = [pool("team-a", cohort="eng", h100={"nvidia_com_gpu": 1})]

    _pools, found_cohorts = passed(pools, [cohort("eng", a100=4)], [])

    assert found_cohorts == {
        "eng": {("a100", "nvidia.com/gpu"): ("0", "0", "0"), GPU: ("0", "0", "0")}
    }


def test_cohorts_in_a_loop_of_parents_get_no_status():
    cohorts = [cohort("a", parent="b"), cohort("b", parent="a")]
    pools = [pool("team-a", cohort="a", h100={"nvidia_com_gpu": 1})]
    actors = [actor("embed", "team-a")]

    used = pool_usage(pools, actors, (), admit(pools, cohorts, {}, actors))

    assert plan_cohort_statuses(cohorts, lending(pools, used.usage, cohorts)) == {}


def test_a_pool_lends_no_more_than_its_lending_limit():
    pools = [
        pool("team-a", cohort="eng", h100={"nvidia_com_gpu": 0}),
        pool("team-b", cohort="eng", h100={"nvidia_com_gpu": {"nominal": 10, "lendingLimit": 2}}),
        pool("team-c", cohort="eng", h100={"nvidia_com_gpu": 10}),
    ]
    actors = [actor("embed", "team-a", desired=8)]

    found_pools, _cohorts = passed(pools, [cohort("eng")], actors)

    assert found_pools["team-a"] == {GPU: ("8", "8", "0")}
    assert found_pools["team-b"] == {GPU: ("0", "0", "2")}
    assert found_pools["team-c"] == {GPU: ("0", "0", "6")}


def test_quota_a_lending_limit_keeps_is_not_lent_and_the_cohort_borrows_instead():
    # keep's 10 stay with keep (lendingLimit 0): team-b's 5 come from ops, through org.
    pools = [
        pool("keep", cohort="eng", h100={"nvidia_com_gpu": {"nominal": 10, "lendingLimit": 0}}),
        pool("team-b", cohort="eng", h100={"nvidia_com_gpu": 0}),
        pool("ops", cohort="org", h100={"nvidia_com_gpu": 5}),
    ]
    cohorts = [cohort("eng", parent="org"), cohort("org")]
    actors = [actor("embed", "team-b", desired=5)]

    found_pools, found_cohorts = passed(pools, cohorts, actors)

    assert found_pools == {
        "keep": {GPU: ("0", "0", "0")},
        "team-b": {GPU: ("5", "5", "0")},
        "ops": {GPU: ("0", "0", "5")},
    }
    assert found_cohorts == {"eng": {GPU: ("5", "5", "0")}, "org": {GPU: ("5", "0", "0")}}


def test_pools_lend_within_their_cohort_when_the_cohorts_cannot_be_read():
    cohorts = [cohort("a", parent="b"), cohort("b", parent="a")]
    pools = [
        pool("team-a", cohort="a", h100={"nvidia_com_gpu": 1}),
        pool("team-b", cohort="a", h100={"nvidia_com_gpu": 2}),
    ]
    usage = {"team-a": {GPU: 3000}}

    assert (
        lent(pools, usage, cohorts) == lent(pools, usage) == {"team-a": {}, "team-b": {GPU: 2000}}
    )


def test_a_pool_whose_quota_cannot_be_read_lends_nothing_and_stops_no_one_else():
    pools = [
        pool("team-a", cohort="eng", h100={"nvidia_com_gpu": 1}),
        pool("team-b", cohort="eng", h100={"nvidia_com_gpu": 2}),
        pool(
            "odd", cohort="eng", h100={"nvidia_com_gpu": {"nominal": 1, "borrowingLimit": "1e400"}}
        ),
    ]
    usage = {"team-a": {GPU: 3000}}

    assert lent(pools, usage) == {"team-a": {}, "team-b": {GPU: 2000}, "odd": {}}


def test_a_pool_named_as_its_cohort_is_counted_once_in_the_cohorts_usage():
    pools = [
        pool("eng", cohort="eng", h100={"nvidia_com_gpu": 1}),
        pool("ops", cohort="eng", h100={"nvidia_com_gpu": 1}),
    ]
    actors = [actor("embed", "eng"), actor("judge", "ops")]

    _pools, found_cohorts = passed(pools, [cohort("eng")], actors)

    assert found_cohorts == {"eng": {GPU: ("2", "0", "0")}}
