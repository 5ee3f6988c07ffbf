"""Random churn on the stand-in cluster: actors scaled up, down and to zero, several at once,
and pools given more quota, while the controller keeps admitting. Deterministic given the seed
(the changes; not how the handlers interleave).

At every write of a Deployment the quota holds (`quota_watch`, asserted for each seed), and after
each batch of changes the cluster settles where the engine says: each actor's admitted replicas
are what `admit` decides from the cluster as it stands (nothing left for a pass to change), and
each Deployment runs min(desired, admitted).

Two pools of two GPUs share a cohort: team-a preempts by priority within itself (other over
text), team-b reclaims what team-a borrowed (gone over both).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import msgspec
import pytest
from asya_operator.api.actor import AsyncActor
from asya_operator.api.pool import ResourcePool
from asya_operator.plans.admission import admit
from asya_operator.plans.scaling import admitted_replicas, desired_replicas
from asya_operator.plans.workloads import PooledActor

from tests.operator.controller_world import ACTORS, DEPLOYMENTS, WAIT_S
from tests.operator.quota_watch import POOLS
from tests.operator.test_controller_admission import gpu_actor, pool_body

pytestmark = [pytest.mark.rabbitmq, pytest.mark.usefixtures("quota_watch")]

ACTOR_POOLS = {"text": "team-a", "other": "team-a", "gone": "team-b"}
PRIORITIES = {"text": 0, "other": 10, "gone": 0}
STEPS = 10


def churn(seed: int) -> list[list[tuple[str, str, int]]]:
    """Batches of changes: ("scale", actor, replicas) or ("quota", pool, more GPUs)."""
    chance = random.Random(seed)
    batches = []
    for _ in range(STEPS):
        batch = []
        for actor in chance.sample(sorted(ACTOR_POOLS), k=chance.randint(1, 3)):
            batch.append(("scale", actor, chance.choice([0, 0, 1, 2, 3, 4])))
        if chance.random() < 0.2:
            batch.append(("quota", chance.choice(["team-a", "team-b"]), 1))
        batches.append(batch)
    return batches


def engine_standing(cluster: Any, namespace: str) -> list[str]:
    """What differs between the cluster and the engine's decision on it (empty: settled)."""
    stored = {n: cluster.current(ACTORS, namespace, n) for n in ACTOR_POOLS}
    if any(body is None for body in stored.values()):
        return ["an actor is missing"]
    actors = {n: msgspec.convert(body, AsyncActor) for n, body in stored.items()}
    order = sorted(actors, key=lambda n: (actors[n].metadata["creationTimestamp"], n))
    pooled = [
        PooledActor(
            namespace=namespace,
            name=name,
            pool=ACTOR_POOLS[name],
            priority=PRIORITIES[name],
            age=order.index(name),
            flavor=None,
            resources=actor.spec.resources,
            desired=desired_replicas(actor),
            admitted=admitted_replicas(actor),
            admitted_flavor=actor.status.admitted_flavor if actor.status else None,
        )
        for name, actor in actors.items()
    ]
    pools = [msgspec.convert(p, ResourcePool) for p in cluster.stored(POOLS)]
    decided = admit(pools, [], {}, pooled)
    differs = []
    for name, actor in actors.items():
        deployment = cluster.current(DEPLOYMENTS, namespace, name) or {"spec": {}}
        running = deployment["spec"].get("replicas")
        admitted = decided.actors[namespace, name].admitted
        wanted = min(desired_replicas(actor), admitted)
        if (admitted_replicas(actor), running) != (admitted, wanted):
            differs.append(
                f"{name}: admitted {admitted_replicas(actor)} (engine: {admitted}),"
                f" Deployment {running} (engine: {wanted})"
            )
    return differs


class Settling:
    """Waits, at each actor or Deployment write (bounded), until the cluster stands where the
    engine says."""

    def __init__(self, world) -> None:
        self.world = world
        self.written = asyncio.Event()
        world.cluster.after_write(ACTORS, self.written.set)
        world.cluster.after_write(DEPLOYMENTS, self.written.set)

    def standing(self) -> list[str]:
        return engine_standing(self.world.cluster, self.world.namespace)

    async def settled(self) -> None:
        try:
            async with asyncio.timeout(WAIT_S):
                while self.standing():
                    self.written.clear()
                    await self.written.wait()
        except TimeoutError:
            pytest.fail(f"not settled within {WAIT_S} s: {self.standing()}")


@pytest.mark.parametrize("seed", [1, 2, 3], ids=lambda s: f"seed-{s}")
async def test_random_scaling_never_runs_more_than_the_quota_and_settles_where_the_engine_says(
    world, broker_secret, operator, queues, quota, quota_watch, seed
):
    create, patch = quota
    settling = Settling(world)
    gpus = {"team-a": 2, "team-b": 2}
    await create(
        "resourcepools", pool_body(2, cohort="gpus", preemption={"withinPool": "LowerPriority"})
    )
    await create(
        "resourcepools",
        pool_body(2, name="team-b", cohort="gpus", preemption={"reclaimWithinCohort": "Any"}),
    )
    for name, pool in ACTOR_POOLS.items():
        await world.create_actor(gpu_actor(name, replicas=0, pool=pool, priority=PRIORITIES[name]))
    await settling.settled()

    for batch in churn(seed):
        changes = []
        for what, name, count in batch:
            if what == "scale":
                changes.append(world.patch_actor(name, {"spec": {"replicas": count}}))
            else:
                gpus[name] += count
                pool_spec = pool_body(gpus[name], name=name)["spec"]
                changes.append(
                    patch("resourcepools", name, {"spec": {"quotas": pool_spec["quotas"]}})
                )
        await asyncio.gather(*changes)
        await settling.settled()

    assert quota_watch.violations == []
