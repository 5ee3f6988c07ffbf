"""The admission loop driven by hand on the stand-in cluster, with a clock of the test's.

No kopf here: the test makes the changes a burst of events would announce, calls `request()`
as the handlers do, and holds a pass open (a cluster client whose first read waits for the test)
to make a burst arrive while a pass runs. What it shows: a burst is one pass, the decisions
are the engine's on the same snapshot, the clock is the one given, and a failed pass reaches
the handlers that wait for it and is tried again.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime

import pytest
from asya_operator.api.actor import AsyncActor
from asya_operator.config import load_operator_config
from asya_operator.kube import AdmissionWorld, Kube, NameOwners
from asya_operator.plans.admission import admit
from asya_operator.plans.workloads import PooledActor
from asya_operator.reconcile.admission import AdmissionLoop, AdmissionPassError

from tests.operator.test_controller_admission import gpu_actor, pool_body
from tests.operator.test_controller_gangs import gang

pytestmark = pytest.mark.usefixtures("quota_watch")

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
ACTORS = 10
CHANGES = 100


class HeldKube(Kube):
    """The cluster client, but each pass's first read waits while `held` is clear."""

    def __init__(self) -> None:
        super().__init__()
        self.held = asyncio.Event()
        self.held.set()
        self.reading = asyncio.Event()
        self.failures = 0

    async def admission_world(self) -> AdmissionWorld:
        self.reading.set()
        await self.held.wait()
        if self.failures:
            self.failures -= 1
            raise RuntimeError("the API server answered 500")
        return await super().admission_world()


@pytest.fixture
async def loop(world):
    kube = HeldKube()
    await kube.connect()
    running = AdmissionLoop(kube, load_operator_config(os.environ), clock=lambda: NOW)
    running.start()
    yield running, kube
    await running.stop()


async def _admitted(kube: Kube, namespace: str) -> dict[str, tuple[int, str | None]]:
    found = {}
    for i in range(ACTORS):
        actor = await kube.read(AsyncActor, namespace, f"a{i}")
        assert actor is not None
        status = actor.status
        found[f"a{i}"] = (
            status.admitted_replicas if status else 0,
            status.admitted_flavor if status else None,
        )
    return found


async def test_a_burst_of_a_hundred_changes_during_a_pass_is_one_more_pass_deciding_as_the_engine(
    world, quota, loop
):
    running, kube = loop
    create, _patch = quota
    await create("resourcepools", pool_body(7))
    for i in range(ACTORS):
        await world.create_actor(gpu_actor(f"a{i}", replicas=0, priority=i % 3))
    await running.settle()
    assert running.passes == 1

    kube.held.clear()
    kube.reading.clear()
    in_flight = running.request()
    await kube.reading.wait()  # a pass has started and waits on its read
    burst: list[int] = []
    desired: dict[str, int] = {}
    for n in range(CHANGES):
        name, replicas = f"a{n % ACTORS}", 1 + (n * 7) % 4
        await world.patch_actor(name, {"spec": {"replicas": replicas}})
        desired[name] = replicas
        burst.append(running.request())
    # Every request of the burst is covered by one pass: the one after the pass in flight.
    assert burst == [in_flight + 1] * CHANGES
    kube.held.set()
    await running.settle()  # asked before that pass starts: covered by it too
    assert running.passes == 3

    # The engine, asked directly about the same snapshot (nothing held before the burst).
    snapshot = await Kube.admission_world(kube)
    pooled = [
        PooledActor(
            namespace=world.namespace,
            name=name,
            pool="team-a",
            priority=int(name[1:]) % 3,
            age=int(name[1:]),
            flavor=None,
            resources=actor.spec.resources,
            desired=desired[name],
            admitted=0,
            admitted_flavor=None,
        )
        for namespace, actor in snapshot.actors
        for name in (actor.metadata["name"],)
    ]
    engine = admit(snapshot.pools, snapshot.cohorts, snapshot.namespace_labels, pooled, [])
    expected = {
        key[1]: (decision.admitted, decision.flavor if decision.admitted else None)
        for key, decision in engine.actors.items()
    }
    assert sum(count for count, _flavor in expected.values()) == 7  # the quota, all of it
    assert await _admitted(kube, world.namespace) == expected


async def test_the_statuses_of_a_pass_carry_the_loops_clock(world, quota, loop):
    running, kube = loop
    create, _patch = quota
    await create("resourcepools", pool_body(1))
    await world.create_actor(gpu_actor("a0", replicas=2))
    await running.settle()
    actor = await kube.read(AsyncActor, world.namespace, "a0")
    assert actor is not None
    assert actor.status is not None
    admitted = {c.type: c for c in actor.status.conditions or ()}["Admitted"]
    assert admitted.status == "False"  # 1 of 2: waiting since the loop's now
    at = datetime.fromtimestamp(NOW, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert admitted.last_transition_time == at


async def test_a_failed_pass_reaches_whoever_waits_for_it_and_is_tried_again(world, quota, loop):
    running, kube = loop
    create, _patch = quota
    await create("resourcepools", pool_body(2))
    await world.create_actor(gpu_actor("a0", replicas=2))
    kube.failures = 1
    with pytest.raises(AdmissionPassError, match="500"):
        await running.settle()
    # Tried again on its own after recheck_s (no request), and then it decides.
    kube.reading.clear()
    async with asyncio.timeout(10):
        await kube.reading.wait()
    await running.settle()
    actor = await kube.read(AsyncActor, world.namespace, "a0")
    assert actor is not None
    assert actor.status is not None
    assert actor.status.admitted_replicas == 2


async def test_a_waiter_cancelled_does_not_cancel_the_pass_the_others_wait_for(world, loop):
    running, kube = loop
    await running.settle()
    kube.held.clear()
    kube.reading.clear()
    first = asyncio.create_task(running.settle())
    await kube.reading.wait()
    impatient, patient = (asyncio.create_task(running.settle()) for _ in range(2))
    await asyncio.sleep(0)  # both waiting on the pass after the one in flight

    impatient.cancel()
    kube.held.set()

    await first
    await patient  # the pass it waited for ran, though another waiter of it was cancelled
    assert impatient.cancelled()
    assert running.passes == 3


async def test_whoever_waits_when_the_loop_stops_is_told_so(world, loop):
    running, kube = loop
    await running.settle()
    kube.held.clear()
    kube.reading.clear()
    waiting = asyncio.create_task(running.settle())
    await kube.reading.wait()
    queued = asyncio.create_task(running.settle())
    await asyncio.sleep(0)

    await running.stop()

    for task in (waiting, queued):
        with pytest.raises(RuntimeError, match="stopped"):
            await task
    with pytest.raises(RuntimeError, match="not running"):
        await running.settle()


class CountingKube(Kube):
    """The cluster client, counting the name-owner lists it is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.name_lists: list[str] = []

    async def name_owners(self, namespace: str) -> NameOwners:
        self.name_lists.append(namespace)
        return await super().name_owners(namespace)


async def test_a_pass_lists_a_namespaces_name_owners_once_however_many_groups_it_syncs(
    world, quota, broker_secret
):
    create, _patch = quota
    await create("resourcepools", pool_body(7))
    for name in ("train", "eval", "tune"):
        await world.create_group(gang(name, workers=1))
    kube = CountingKube()
    await kube.connect()
    loop = AdmissionLoop(kube, load_operator_config(os.environ), clock=lambda: NOW)

    await loop.run_pass()
    await loop.run_pass()

    assert kube.name_lists == [world.namespace, world.namespace]
