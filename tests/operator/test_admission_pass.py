"""One admission pass over elastic AsyncActors: how many replicas each pool admits, replica by
replica, as `admit` decides for the controller."""

from __future__ import annotations

from typing import Any

import msgspec
from asya_operator.api.pool import Cohort, ResourcePool
from asya_operator.api.template import ActorResources
from asya_operator.plans.admission import admit as admit_all
from asya_operator.plans.workloads import ActorAdmission, PooledActor


def pool(
    name: str,
    *,
    cohort: str | None = None,
    within: str = "Never",
    reclaim: str = "Never",
    selector: dict[str, Any] | None = None,
    **flavors: dict[str, Any],
) -> ResourcePool:
    """flavors: flavor -> {resource: nominal or {nominal, borrowingLimit, lendingLimit}};
    `nvidia_com_gpu` stands for `nvidia.com/gpu`."""
    quotas = [
        {
            "flavor": flavor,
            "resources": [
                {"name": r.replace("_com_", ".com/")}
                | (q if isinstance(q, dict) else {"nominal": q})
                for r, q in resources.items()
            ],
        }
        for flavor, resources in flavors.items()
    ]
    spec: dict[str, Any] = {
        "quotas": quotas,
        "preemption": {"withinPool": within, "reclaimWithinCohort": reclaim},
    }
    if cohort is not None:
        spec["cohort"] = cohort
    if selector is not None:
        spec["namespaceSelector"] = selector
    return msgspec.convert({"metadata": {"name": name}, "spec": spec}, ResourcePool)


def cohort(name: str, parent: str | None = None) -> Cohort:
    return msgspec.convert({"metadata": {"name": name}, "spec": {"parent": parent}}, Cohort)


def actor(
    name: str,
    pool: str = "team-a",
    *,
    namespace: str = "ml-a",
    priority: int = 0,
    age: int = 0,
    flavor: str | None = None,
    desired: int = 1,
    admitted: int = 0,
    admitted_flavor: str | None = None,
    gpus: int = 1,
    cpu: str | None = None,
) -> PooledActor:
    return PooledActor(
        namespace=namespace,
        name=name,
        pool=pool,
        priority=priority,
        age=age,
        flavor=flavor,
        resources=ActorResources(cpu=cpu, gpus=gpus),
        desired=desired,
        admitted=admitted,
        admitted_flavor=admitted_flavor,
    )


def admit(pools, actors, cohorts=(), labels=None) -> dict[str, ActorAdmission]:
    """The decisions, keyed by actor name (every test actor's namespace is implied)."""
    decided = admit_all(pools, cohorts, labels or {}, actors).actors
    assert list(decided) == [(a.namespace, a.name) for a in actors]
    return {name: decision for (_, name), decision in decided.items()}


def counts(decided: dict[str, ActorAdmission]) -> dict[str, int]:
    return {name: d.admitted for name, d in decided.items()}


def test_an_actor_is_admitted_up_to_its_pools_quota_and_no_further():
    decided = admit([pool("team-a", h100={"nvidia_com_gpu": 3})], [actor("embed", desired=5)])

    assert decided["embed"] == ActorAdmission(
        admitted=3,
        flavor="h100",
        borrowing=False,
        message="3 of 5 replicas admitted, 2 waiting; one more replica needs 1 nvidia.com/gpu:"
        " insufficient quota for nvidia.com/gpu in flavor h100: needs 1, pool team-a has 0"
        " unused (1 more needed); preemption could make room, but no admitted workload qualifies"
        " under pool team-a's policy (withinPool: Never, reclaimWithinCohort: Never)",
        preempted_by=None,
    )


def test_an_actor_that_fits_is_admitted_in_full_with_no_message():
    decided = admit([pool("team-a", h100={"nvidia_com_gpu": 3})], [actor("embed", desired=3)])

    assert decided["embed"] == ActorAdmission(3, "h100", False, None, None)


def test_scaling_down_releases_quota_to_another_actor_in_the_same_pass():
    pools = [pool("team-a", h100={"nvidia_com_gpu": 4})]
    actors = [
        actor("shrinks", age=1, desired=1, admitted=4, admitted_flavor="h100"),
        actor("grows", age=2, desired=3),
    ]

    decided = admit(pools, actors)

    assert counts(decided) == {"shrinks": 1, "grows": 3}


def test_admitted_replicas_are_kept_when_a_newer_actor_of_the_same_priority_arrives():
    # Equal priority and newer may be preempted in this pool: only ages protect "running".
    pools = [pool("team-a", within="LowerOrNewerEqualPriority", h100={"nvidia_com_gpu": 4})]
    actors = [
        actor("running", age=5, desired=4, admitted=4, admitted_flavor="h100"),
        actor("arrives", age=9, desired=2),
    ]

    decided = admit(pools, actors)

    assert counts(decided) == {"running": 4, "arrives": 0}
    assert decided["running"].preempted_by is None
    assert decided["arrives"].message is not None
    assert decided["arrives"].message.startswith("0 of 2 replicas admitted, 2 waiting;")


def test_a_higher_priority_actor_preempts_replicas_of_a_lower_one_and_is_named():
    pools = [pool("team-a", within="LowerPriority", h100={"nvidia_com_gpu": 4})]
    actors = [
        actor("batch", age=1, desired=4, admitted=4, admitted_flavor="h100"),
        actor("urgent", age=2, priority=10, desired=2),
    ]

    decided = admit(pools, actors)

    assert counts(decided) == {"batch": 2, "urgent": 2}
    assert decided["batch"].preempted_by == "ml-a/urgent"
    assert decided["urgent"].preempted_by is None
    assert decided["batch"].message is not None
    assert decided["batch"].message.startswith(
        "2 of 4 replicas admitted, 2 waiting; one more replica needs 1 nvidia.com/gpu:"
        " insufficient quota for nvidia.com/gpu in flavor h100: needs 1, pool team-a has 0"
        " unused (1 more needed)"
    )


def test_an_actor_borrows_what_an_idle_pool_of_its_cohort_does_not_use():
    pools = [
        pool("team-a", cohort="eng", h100={"nvidia_com_gpu": 2}),
        pool("team-b", cohort="eng", h100={"nvidia_com_gpu": 2}),
    ]

    decided = admit(pools, [actor("embed", desired=3)])

    assert decided["embed"] == ActorAdmission(3, "h100", True, None, None)


def test_an_actor_within_its_nominal_quota_is_not_borrowing():
    pools = [
        pool("team-a", cohort="eng", h100={"nvidia_com_gpu": 2}),
        pool("team-b", cohort="eng", h100={"nvidia_com_gpu": 2}),
    ]

    decided = admit(pools, [actor("embed", desired=2)])

    assert decided["embed"].borrowing is False


def test_a_lender_reclaims_its_quota_from_a_borrowing_actor():
    # The borrower has the higher priority: reclaimWithinCohort Any takes quota back anyway.
    pools = [
        pool("team-a", cohort="eng", reclaim="Any", h100={"nvidia_com_gpu": 2}),
        pool("team-b", cohort="eng", h100={"nvidia_com_gpu": 2}),
    ]
    actors = [
        actor(
            "borrower",
            "team-b",
            namespace="ml-b",
            age=1,
            priority=50,
            desired=4,
            admitted=4,
            admitted_flavor="h100",
        ),
        actor("owner", "team-a", age=2, desired=2),
    ]

    decided = admit(pools, actors)

    assert counts(decided) == {"borrower": 2, "owner": 2}
    assert decided["borrower"].preempted_by == "ml-a/owner"
    assert decided["owner"].borrowing is False


def test_an_actor_naming_a_flavor_is_never_admitted_in_another():
    pools = [pool("team-a", a={"nvidia_com_gpu": 4}, b={"nvidia_com_gpu": 2})]

    decided = admit(pools, [actor("embed", flavor="b", desired=3)])

    assert (decided["embed"].admitted, decided["embed"].flavor) == (2, "b")


def test_an_actor_holding_quota_stays_in_its_flavor_though_another_has_room():
    pools = [pool("team-a", a={"nvidia_com_gpu": 4}, b={"nvidia_com_gpu": 2})]

    decided = admit(pools, [actor("embed", desired=3, admitted=1, admitted_flavor="b")])

    assert (decided["embed"].admitted, decided["embed"].flavor) == (2, "b")


def test_a_new_actor_takes_the_first_flavor_with_quota_for_all_it_requests():
    pools = [pool("team-a", standard={"cpu": 8}, h100={"cpu": 8, "nvidia_com_gpu": 2})]

    decided = admit(pools, [actor("embed", cpu="1", desired=2)])

    assert (decided["embed"].admitted, decided["embed"].flavor) == (2, "h100")


def test_an_actor_that_now_names_another_flavor_gives_up_the_old_one():
    pools = [pool("team-a", a={"nvidia_com_gpu": 4}, b={"nvidia_com_gpu": 1})]

    decided = admit(pools, [actor("embed", flavor="b", desired=3, admitted=3, admitted_flavor="a")])

    assert (decided["embed"].admitted, decided["embed"].flavor) == (1, "b")


def test_an_actor_naming_a_flavor_its_pool_lacks_is_told_so():
    pools = [pool("team-a", a={"nvidia_com_gpu": 4})]

    decided = admit(pools, [actor("embed", flavor="h100", desired=2)])

    assert decided["embed"] == ActorAdmission(
        0,
        None,
        False,
        "0 of 2 replicas admitted, 2 waiting; one more replica needs 1 nvidia.com/gpu: pod set"
        " 'replica': may use only flavor h100,"
        " which pool team-a does not have (it has: a)",
        None,
    )


def test_an_actor_whose_pool_does_not_exist_is_admitted_nothing_and_told_why():
    pools = [pool("team-a", h100={"nvidia_com_gpu": 4})]
    actors = [actor("lost", "team-x", desired=2, admitted=2, admitted_flavor="h100"), actor("ok")]

    decided = admit(pools, actors)

    assert decided["lost"] == ActorAdmission(
        0,
        None,
        False,
        "0 of 2 replicas admitted: pool team-x does not exist (no ResourcePool of that name)",
        None,
    )
    assert decided["ok"] == ActorAdmission(1, "h100", False, None, None)


def test_an_actor_in_a_namespace_its_pool_does_not_select_is_admitted_nothing():
    selector = {"matchLabels": {"team": "a"}}
    pools = [pool("team-a", selector=selector, h100={"nvidia_com_gpu": 4})]
    actors = [actor("outsider", namespace="ml-b", desired=2), actor("insider")]

    decided = admit(pools, actors, labels={"ml-a": {"team": "a"}, "ml-b": {"team": "b"}})

    assert decided["outsider"].message == (
        "0 of 2 replicas admitted: pool team-a does not admit namespace ml-b (its"
        " namespaceSelector does not select it)"
    )
    assert (decided["outsider"].admitted, decided["insider"].admitted) == (0, 1)


def test_a_selector_on_the_namespace_name_selects_without_labels_given():
    selector = {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ml-a"]}
        ]
    }
    pools = [pool("team-a", selector=selector, h100={"nvidia_com_gpu": 4})]

    decided = admit(pools, [actor("embed", desired=2)])

    assert decided["embed"].admitted == 2


def test_an_actor_scaled_to_zero_is_admitted_nothing_and_needs_no_message():
    pools = [pool("team-a", h100={"nvidia_com_gpu": 4})]
    actors = [
        actor("idle", desired=0, admitted=2, admitted_flavor="h100"),
        actor("lost", "x", desired=0),
    ]

    decided = admit(pools, actors)

    assert decided == {
        "idle": ActorAdmission(0, None, False, None, None),
        "lost": ActorAdmission(0, None, False, None, None),
    }


def test_an_actor_requesting_nothing_is_admitted_in_full_as_kueue_does():
    # A flavor whose GPU quota is 0 offers no GPU: nothing to say of it.
    without = [pool("team-a", h100={"nvidia_com_gpu": 0})]
    with_gpus = [pool("team-a", h100={"nvidia_com_gpu": 4})]

    decided = admit(without, [actor("light", gpus=0, desired=5)])
    on_gpus = admit(with_gpus, [actor("light", gpus=0, desired=5)])

    assert decided["light"] == ActorAdmission(5, "h100", False, None, None)
    assert on_gpus["light"] == ActorAdmission(
        5,
        "h100",
        False,
        None,
        None,
        accelerator_fallback="on h100: pool team-a has no flavor without accelerators",
    )


GPU_FIRST = {"h100": {"cpu": 64, "nvidia_com_gpu": 8}, "cpu": {"cpu": 32}}


def test_an_actor_asking_for_no_accelerator_is_admitted_on_a_flavor_without_one_listed_later():
    decided = admit([pool("team-a", **GPU_FIRST)], [actor("web", gpus=0, cpu="4", desired=2)])

    assert decided["web"] == ActorAdmission(2, "cpu", False, None, None)


def test_an_actor_asking_for_an_accelerator_still_takes_the_first_flavor_that_covers_it():
    decided = admit([pool("team-a", **GPU_FIRST)], [actor("embed", gpus=1, cpu="4")])

    assert decided["embed"] == ActorAdmission(1, "h100", False, None, None)


def test_an_actor_asking_for_no_accelerator_kept_on_an_accelerator_flavor_says_why():
    decided = admit([pool("team-a", **GPU_FIRST)], [actor("web", gpus=0, cpu="4", flavor="h100")])

    assert decided["web"] == ActorAdmission(
        1,
        "h100",
        False,
        None,
        None,
        accelerator_fallback="on h100: pod set replica may use only flavor h100",
    )


def test_an_actor_whose_requests_cannot_be_read_is_refused_alone():
    pools = [pool("team-a", h100={"cpu": 8, "nvidia_com_gpu": 4})]
    actors = [actor("broken", cpu="-1", desired=1), actor("fine", cpu="1")]

    decided = admit(pools, actors)

    assert decided["broken"].message == (
        "0 of 1 replicas admitted: resources: expected a quantity such as 2, '500m' or '16Gi',"
        " got '-1'"
    )
    assert decided["fine"].admitted == 1


def test_a_scenario_the_engine_refuses_keeps_what_is_held_and_admits_nothing_more():
    pools = [pool("team-a", cohort="c1", h100={"nvidia_com_gpu": 8})]
    cohorts = [cohort("c1", parent="c2"), cohort("c2", parent="c1")]
    actors = [actor("embed", desired=3, admitted=2, admitted_flavor="h100")]

    decided = admit(pools, actors, cohorts=cohorts)

    assert decided["embed"] == ActorAdmission(
        2,
        "h100",
        False,
        "2 of 3 replicas admitted: admission cannot run: cohorts form a loop: c1 -> c2 -> c1",
        None,
    )
