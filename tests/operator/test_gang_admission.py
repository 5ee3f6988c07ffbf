"""One admission pass over ActorGroups' gang instances, beside elastic actors: an instance is
admitted whole or not at all, preempted whole, and weighed against actors in the same engine
run, as `admit` decides for the controller."""

from __future__ import annotations

import dataclasses
from typing import Any

from asya_operator.api.template import ActorResources
from asya_operator.plans.admission import admit
from asya_operator.plans.workloads import InstanceAdmission, PooledGroup, PooledMember

from tests.operator.test_admission_pass import actor, cohort, pool

GPU = ActorResources(gpus=1)


def gang(
    name: str,
    pool_name: str = "team-a",
    *,
    namespace: str = "ml-b",
    priority: int = 0,
    age: int = 0,
    members: dict[str, Any] | None = None,
    pending: tuple[int, ...] = (0,),
    held: dict[int, dict[str, tuple[str, int]]] | None = None,
) -> PooledGroup:
    """members: name -> replicas, or (replicas, minReplicas); each asks one GPU per replica."""
    shaped = [
        PooledMember(
            name=member,
            replicas=size if isinstance(size, int) else size[0],
            min_replicas=None if isinstance(size, int) else size[1],
            resources=GPU,
            flavor=None,
        )
        for member, size in (members or {"leader": 1, "worker": 3}).items()
    ]
    return PooledGroup(
        namespace=namespace,
        name=name,
        pool=pool_name,
        priority=priority,
        age=age,
        members=tuple(shaped),
        pending=pending,
        held=held or {},
    )


def gpus(n: int, **options: Any):
    return pool("team-a", h100={"nvidia_com_gpu": n}, **options)


def instances(pools, groups, actors=()) -> dict[str, dict[int, InstanceAdmission]]:
    decided = admit(pools, (), {}, list(actors), list(groups))
    return {name: decision for (_, name), decision in decided.groups.items()}


def test_a_gang_that_fits_is_admitted_whole_with_each_members_count_and_flavor():
    decided = instances([gpus(4)], [gang("ddp")])

    assert decided["ddp"][0] == InstanceAdmission({"leader": ("h100", 1), "worker": ("h100", 3)})


def test_a_gang_that_does_not_fit_gets_nothing_and_says_what_it_needs():
    decided = instances([gpus(3)], [gang("ddp")])

    waiting = decided["ddp"][0]
    assert waiting.members is None
    assert waiting.message is not None
    assert "insufficient quota for nvidia.com/gpu in flavor h100" in waiting.message


def test_instances_are_admitted_one_whole_gang_at_a_time_lower_indexes_first():
    decided = instances([gpus(9)], [gang("ddp", pending=(0, 1, 2))])

    assert [decided["ddp"][i].members is not None for i in (0, 1, 2)] == [True, True, False]


def test_a_member_with_a_minimum_is_admitted_with_the_most_that_fits():
    decided = instances([gpus(3)], [gang("ddp", members={"leader": 1, "worker": (3, 1)})])

    assert decided["ddp"][0].members == {"leader": ("h100", 1), "worker": ("h100", 2)}


def test_a_held_instance_keeps_its_quota_and_a_newer_one_waits():
    held = {0: {"leader": ("h100", 1), "worker": ("h100", 3)}}
    decided = instances([gpus(4)], [gang("ddp", pending=(1,), held=held)])

    assert decided["ddp"][0].members == held[0]
    assert decided["ddp"][1].members is None


def test_a_higher_priority_gang_preempts_a_lower_one_whole_and_is_named():
    held = {0: {"leader": ("h100", 1), "worker": ("h100", 3)}}
    low = gang("batch", age=1, pending=(), held=held)
    high = gang("urgent", age=2, priority=10, members={"worker": 2})

    decided = instances([gpus(4, within="LowerPriority")], [low, high])

    assert decided["urgent"][0].members == {"worker": ("h100", 2)}
    preempted = decided["batch"][0]
    assert preempted.members is None
    assert preempted.preempted_by == "ml-b/urgent[0]"


def test_a_gang_and_an_elastic_actor_share_one_pool_older_first():
    older = actor("embed", age=1, desired=3)
    newer = gang("ddp", age=2)

    decided = admit([gpus(5)], (), {}, [older], [newer])

    assert decided.actors["ml-a", "embed"].admitted == 3
    assert decided.groups["ml-b", "ddp"][0].members is None


def test_a_higher_priority_gang_takes_replicas_from_an_elastic_actor_and_is_named():
    running = actor("embed", age=1, desired=4, admitted=4, admitted_flavor="h100")
    urgent = gang("ddp", age=2, priority=10, members={"worker": 2})

    decided = admit([gpus(4, within="LowerPriority")], (), {}, [running], [urgent])

    assert decided.groups["ml-b", "ddp"][0].members == {"worker": ("h100", 2)}
    assert decided.actors["ml-a", "embed"].admitted == 2
    assert decided.actors["ml-a", "embed"].preempted_by == "ml-b/ddp[0]"


def test_a_gang_whose_pool_does_not_exist_waits_whole_and_gives_up_what_it_held():
    held = {0: {"leader": ("h100", 1), "worker": ("h100", 3)}}
    decided = instances([gpus(4)], [gang("ddp", "gone", pending=(1,), held=held)])

    assert {i: d.members for i, d in decided["ddp"].items()} == {0: None, 1: None}
    assert decided["ddp"][1].message == "pool gone does not exist (no ResourcePool of that name)"


def test_a_held_instance_in_a_flavor_the_pool_no_longer_has_asks_again():
    held = {0: {"leader": ("a100", 1), "worker": ("a100", 3)}}
    decided = instances([gpus(4)], [gang("ddp", pending=(), held=held)])

    assert decided["ddp"][0].members == {"leader": ("h100", 1), "worker": ("h100", 3)}


def test_a_scenario_the_engine_refuses_keeps_held_gangs_and_admits_nothing_more():
    looped = [pool("team-a", cohort="a", h100={"nvidia_com_gpu": 8})]
    held = {0: {"leader": ("h100", 1), "worker": ("h100", 3)}}
    decided = admit(
        looped, [cohort("a", "b"), cohort("b", "a")], {}, [], [gang("ddp", pending=(1,), held=held)]
    )

    instances_now = decided.groups["ml-b", "ddp"]
    assert instances_now[0].members == held[0]
    assert instances_now[1].members is None
    assert instances_now[1].message is not None
    assert instances_now[1].message.startswith("admission cannot run:")


def test_a_member_asking_for_no_accelerator_on_an_accelerator_flavor_is_named_with_why():
    pools = [pool("team-a", h100={"cpu": 64, "nvidia_com_gpu": 8})]
    group = gang("train", members={"leader": 1, "feeder": 1})
    leader, feeder = group.members
    feeder = dataclasses.replace(feeder, resources=ActorResources(cpu="2", gpus=0))
    group = dataclasses.replace(group, members=(leader, feeder))

    decided = instances(pools, [group])

    assert decided["train"][0].accelerator_fallback == (
        "feeder: on h100: pool team-a has no flavor without accelerators covering cpu"
    )
