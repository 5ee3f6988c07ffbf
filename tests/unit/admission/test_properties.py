"""Invariants of admission over random scenarios (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asya.admission.model import load_scenario
from asya.admission.scheduler import Scheduler
from tests.factories import pool, workload

POLICIES = st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])
RECLAIM = st.sampled_from(["Never", "LowerPriority", "Any"])


@st.composite
def scenarios(draw):
    pools = []
    for index in range(draw(st.integers(1, 4))):
        quota = {"nominal": draw(st.integers(0, 12))}
        if draw(st.booleans()):
            quota["borrowingLimit"] = draw(st.integers(0, 6))
        if draw(st.booleans()):
            quota["lendingLimit"] = draw(st.integers(0, quota["nominal"]))
        pools.append(
            pool(
                f"p{index}",
                cohort=draw(st.sampled_from([None, "c0", "c1"])),
                strategy=draw(st.sampled_from(["StrictFIFO", "BestEffortFIFO"])),
                within=draw(POLICIES),
                reclaim=draw(RECLAIM),
                borrow_policy=draw(st.sampled_from(["Never", "LowerPriority"])),
                threshold=draw(st.none() | st.integers(-2, 2)),
                default={"cpu": quota},
            )
        )
    workloads = []
    for index in range(draw(st.integers(1, 14))):
        count = draw(st.integers(1, 5))
        workloads.append(
            workload(
                f"w{index}",
                f"p{draw(st.integers(0, len(pools) - 1))}",
                priority=draw(st.integers(-2, 2)),
                created=index,
                count=count,
                min_count=draw(st.none() | st.integers(1, count)),
                cpu=draw(st.integers(1, 3)),
            )
        )
    return load_scenario({"pools": pools, "workloads": workloads})


def check_quota_holds(scheduler: Scheduler) -> None:
    tree = scheduler.tree
    fr = ("default", "cpu")
    for node in tree.pools.values():
        assert tree.available(node, fr) >= 0, f"pool {node.name} is over what it may take"
        limit = node.quotas.get(fr)
        if limit is not None and limit.borrowing_limit is not None and node.parent is not None:
            assert node.usage.get(fr, 0) <= node.nominal(fr) + limit.borrowing_limit
    for node in [*tree.cohorts.values(), *tree.pools.values()]:
        if node.parent is None:
            assert node.usage.get(fr, 0) <= node.subtree.get(fr, 0), f"{node.name} over its total"
    recomputed: dict[str, int] = {}
    for held in scheduler.holding.values():
        recomputed[held.info.pool] = recomputed.get(held.info.pool, 0) + held.info.usage.get(fr, 0)
    for name, node in tree.pools.items():
        assert node.usage.get(fr, 0) == recomputed.get(name, 0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_no_cycle_ever_exceeds_a_pools_quota_or_a_cohorts_total(scenario):
    scheduler = Scheduler(scenario)

    for _ in range(60):
        changed = scheduler.cycle().changed
        check_quota_holds(scheduler)
        if not changed:
            break


@settings(max_examples=300, deadline=None)
@given(scenario=scenarios())
def test_a_gang_is_never_partly_admitted(scenario):
    scheduler = Scheduler(scenario)
    for _ in range(60):
        if not scheduler.cycle().changed:
            break

    for name, held in scheduler.holding.items():
        wanted = {ps.name: ps for ps in scheduler.workloads[name].pod_sets}
        assert {n for n, _, _ in held.pod_sets} == set(wanted)
        for pod_set, _, count in held.pod_sets:
            spec = wanted[pod_set]
            low = spec.count if spec.min_count is None else spec.min_count
            assert low <= count <= spec.count


@st.composite
def preemption_scenarios(draw):
    scenario = draw(scenarios())
    # Give each pool some admitted work within its nominal quota, so there is something to preempt.
    raw_pools = [
        pool(
            p.name,
            cohort=p.cohort,
            strategy=p.queueing_strategy.value,
            within=p.preemption.within_pool.value,
            reclaim=p.preemption.reclaim_within_cohort.value,
            borrow_policy=p.preemption.borrow_within_cohort.policy.value,
            threshold=p.preemption.borrow_within_cohort.max_priority_threshold,
            default={"cpu": {"nominal": p.quotas[0].quota("cpu").nominal}},
        )
        for p in scenario.pools
    ]
    held = []
    for p in scenario.pools:
        room = p.quotas[0].quota("cpu").nominal  # as the file wrote it: a whole number of CPUs
        while room > 0 and draw(st.booleans()):
            cpu = draw(st.integers(1, room))
            room -= cpu
            held.append(
                workload(
                    f"held{len(held)}",
                    p.name,
                    priority=draw(st.integers(-2, 2)),
                    created=-100 + len(held),
                    cpu=cpu,
                    admitted="default",
                )
            )
    pending = [
        workload(
            w.name,
            w.pool,
            priority=w.priority,
            created=w.created,
            count=w.pod_sets[0].count,
            min_count=w.pod_sets[0].min_count,
            cpu=w.pod_sets[0].requests["cpu"] // 1000,
        )
        for w in scenario.workloads
    ]
    return load_scenario({"pools": raw_pools, "workloads": held + pending})


@settings(max_examples=300, deadline=None)
@given(scenario=preemption_scenarios())
def test_nothing_is_preempted_by_lower_or_equal_priority_unless_the_policy_allows_it(scenario):
    scheduler = Scheduler(scenario)
    for _ in range(80):
        report = scheduler.cycle()
        check_quota_holds(scheduler)
        if not report.changed:
            break

    pools = {p.name: p for p in scenario.pools}
    for event in scheduler.preempted:
        victim = scheduler.workloads[event.workload]
        preemptor = scheduler.workloads[event.preemptor]
        if victim.priority < preemptor.priority:
            continue
        policy = pools[preemptor.pool].preemption
        if victim.pool == preemptor.pool:
            assert policy.within_pool.value == "LowerOrNewerEqualPriority"
            assert victim.priority == preemptor.priority
            assert victim.created > preemptor.created
        else:
            assert policy.reclaim_within_cohort.value == "Any"
            assert event.reason == "InCohortReclamation"
