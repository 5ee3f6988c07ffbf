"""The admission pass: read every pool, pooled actor and ActorGroup, decide, carry it out.

The controller runs a pass whenever something admission depends on changes (a pool, a cohort,
a pooled actor, a group, a group's pods' readiness) and when a gang's readiness deadline or
requeue time comes (`ReadinessClock`). Passes run one at a time (`memo["admission"]`): each
reads the whole state and writes what it decides. A pass:
1. reads the world (`cluster.read_admission_world`), which pooled actors and groups are being
   deleted among it;
2. moves each group's instances on (`gangs.before_pass`: readiness timeouts, requeues);
3. asks the engine (`admission.admit`) for every pooled actor's replicas and every pooled
   group's pending instances, and records its decisions (`gangs.after_pass`);
4. writes each pool's status;
5. carries the decisions out, shrinking first: an actor or group being deleted, an actor losing
   replicas (the one whose reconcile runs the pass too) and an instance losing its quota are
   scaled away before anything grows, so what runs never exceeds the quota (a preempted pod
   drains: its sidecar gives its envelopes back to the queue); for each change an Event is
   posted (an admission, a preemption, an eviction), then the status written;
6. sets the clock to the next readiness deadline or requeue time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import kopf
import msgspec

from asya_operator import kube as cluster
from asya_operator import metrics
from asya_operator.api.group import ActorGroup, InstanceStatus, held, known_instances
from asya_operator.api.metadata import Owner, actor_name
from asya_operator.config import OperatorConfig
from asya_operator.kube import AdmissionWorld, MemberPods
from asya_operator.plans import instances as gangs
from asya_operator.plans.actor_status import admission_changed, pending_since, plan_admission_status
from asya_operator.plans.admission import admit
from asya_operator.plans.instances import Change, Happened
from asya_operator.plans.pool_status import plan_pool_statuses
from asya_operator.plans.scaling import admitted_replicas, desired_replicas
from asya_operator.plans.workloads import ActorAdmission, Decisions, PooledActor, PooledGroup
from asya_operator.reconcile import actors as actor_sync
from asya_operator.reconcile import groups as group_sync

_log = logging.getLogger(__name__)

Key = tuple[str, str]

_WARNINGS = frozenset({Happened.PREEMPTED, Happened.EVICTED, Happened.DEACTIVATED})


async def run_pass(
    memo: Any,
    logger: kopf.Logger | logging.Logger,
    *,
    skip: Key | None = None,
    refresh: Key | None = None,
) -> None:
    """One admission pass (see the module docstring). `skip` is an AsyncActor whose objects
    the caller applies next itself (its own reconcile: a shrink of its Deployment is still
    written here, before anything grows); `refresh` an ActorGroup whose objects are applied
    even if what it runs is unchanged (its spec changed)."""
    async with memo["admission"]:
        config: OperatorConfig = memo["config"]
        world = await asyncio.to_thread(_read_admission_world)
        now = time.time()
        ready = {
            (ns, g.metadata["name"]): _ready_instances(
                g, world.group_pods.get((ns, g.metadata["name"]), [])
            )
            for ns, g in world.groups
        }
        states, changes = _groups_before(world, ready, now)
        ages = _ages(world)
        pooled = _pooled_actors(world, ages)
        pooled_groups = [
            gangs.pooled_group(group, states[ns, group.metadata["name"]], age=ages[_gk(ns, group)])
            for ns, group in world.groups
            if group.spec.pool is not None
        ]
        decided = admit(world.pools, world.cohorts, world.namespace_labels, pooled, pooled_groups)
        for pooled_group in pooled_groups:
            key = (pooled_group.namespace, pooled_group.name)
            states[key], after = gangs.after_pass(states[key], decided.groups[key], now)
            changes[key] += after
        metrics.ADMISSION_PASSES.inc()
        await _write_pool_statuses(world, pooled, pooled_groups, decided)
        groups = {(ns, g.metadata["name"]): g for ns, g in world.groups}
        # Shrinking first: a preemptor's pods never start before its victim's are scaled away,
        # nor a deleted actor's or group's quota taken before its pods are.
        await _stop_leaving(world.leaving)
        for key, group in groups.items():
            running = set(gangs.holding(states[key]))
            pods = world.group_pods.get(key, [])
            await group_sync.stop_instances_but(group, key[0], running, pods)
        await _carry_out_actors(world, decided, skip, config, logger)
        for key, group in groups.items():
            # Events first: whoever sees the new status finds them posted.
            await _report(group, changes[key], logger)
            seen = ready.get(key, {})
            force = key == refresh
            await group_sync.sync(
                group, key[0], states[key], seen, config, logger=logger, force=force
            )
        memo["clock"].wake_at(_next_deadline(groups, states))


def _read_admission_world() -> AdmissionWorld:
    with cluster.api_client() as api:
        return cluster.read_admission_world(api)


async def _stop_leaving(leaving: Sequence[tuple[str, str, str]]) -> None:
    """Stop the pods of each actor and group being deleted: they are in no pass, so the quota
    they hold is free for others (their own delete handlers do the rest)."""
    for kind, namespace, name in leaving:
        if kind == "AsyncActor":
            await actor_sync.scale_down(namespace, name, 0)
        else:
            await group_sync.delete_group_objects(namespace, name)


def _gk(namespace: str, group: ActorGroup) -> tuple[str, str, str]:
    return ("ActorGroup", namespace, group.metadata["name"])


def _ages(world: AdmissionWorld) -> dict[tuple[str, str, str], int]:
    """Creation order across actors and groups (then kind, namespace and name, for a stable
    order of equal timestamps): smaller is older."""
    keyed = [("AsyncActor", ns, actor_name(a), a.metadata) for ns, a in world.actors]
    keyed += [("ActorGroup", ns, g.metadata["name"], g.metadata) for ns, g in world.groups]
    keyed.sort(key=lambda k: (k[3].get("creationTimestamp", ""), k[0], k[1], k[2]))
    return {(kind, ns, name): age for age, (kind, ns, name, _meta) in enumerate(keyed)}


def _pooled_actors(
    world: AdmissionWorld, ages: Mapping[tuple[str, str, str], int]
) -> list[PooledActor]:
    return [
        PooledActor(
            namespace=namespace,
            name=actor_name(actor),
            pool=str(actor.spec.pool),
            priority=actor.spec.priority,
            age=ages["AsyncActor", namespace, actor_name(actor)],
            flavor=actor.spec.flavor,
            resources=actor.spec.resources,
            desired=desired_replicas(actor),
            admitted=admitted_replicas(actor),
            admitted_flavor=actor.status.admitted_flavor if actor.status else None,
        )
        for namespace, actor in world.actors
    ]


def _ready_instances(group: ActorGroup, pods: Sequence[MemberPods]) -> dict[int, bool]:
    """For each instance holding quota, whether every pod it was admitted with is ready: each
    member's StatefulSet there, and ready with as many pods as the member holds quota for."""
    found = {(p.instance, p.member): p for p in pods}
    ready: dict[int, bool] = {}
    for index, instance in known_instances(group).items():
        holds = held(instance)
        if holds:
            ready[index] = all(
                (index, member) in found and found[index, member].ready >= count
                for member, (_flavor, count) in holds.items()
            )
    return ready


def _groups_before(
    world: AdmissionWorld, ready: Mapping[Key, Mapping[int, bool]], now: float
) -> tuple[dict[Key, dict[int, InstanceStatus]], dict[Key, list[Change]]]:
    states: dict[Key, dict[int, InstanceStatus]] = {}
    changes: dict[Key, list[Change]] = {}
    for namespace, group in world.groups:
        key = (namespace, group.metadata["name"])
        seen = ready.get(key, {})
        if group.spec.pool is None:
            states[key], changes[key] = gangs.unpooled(group, seen), []
        else:
            states[key], changes[key] = gangs.before_pass(group, seen, now)
    return states, changes


async def _write_pool_statuses(
    world: AdmissionWorld,
    pooled: Sequence[PooledActor],
    groups: Sequence[PooledGroup],
    decided: Decisions,
) -> None:
    planned = plan_pool_statuses(world.pools, pooled, groups, decided)
    metrics.record_pools(planned)
    for pool in world.pools:
        name = str(pool.metadata["name"])
        before = msgspec.to_builtins(pool.status) if pool.status is not None else {}
        if {k: before.get(k) for k in planned[name]} != planned[name]:
            await asyncio.to_thread(_write_pool_status, name, planned[name])


def _write_pool_status(name: str, status: dict[str, Any]) -> None:
    with cluster.api_client() as api:
        cluster.write_pool_status(api, name, status)


async def _carry_out_actors(
    world: AdmissionWorld,
    decided: Decisions,
    skip: Key | None,
    config: OperatorConfig,
    logger: kopf.Logger | logging.Logger,
) -> None:
    now = datetime.now(UTC)
    waiting: dict[Key, float] = {}

    def growth(item: tuple[str, Any]) -> int:
        namespace, actor = item
        return decided.actors[namespace, actor_name(actor)].admitted - admitted_replicas(actor)

    # Shrinking actors first, as groups: the Deployments together never run more than quota.
    for namespace, actor in sorted(world.actors, key=growth):
        key = (namespace, actor_name(actor))
        admission = decided.actors[key]
        status = plan_admission_status(actor, admission, now=now)
        since = pending_since(status)
        if since is not None:
            waiting[key] = since
        if not admission_changed(actor, status):
            continue
        words = _admission_words(actor, admission)
        logger.info(f"admission: {key[0]}/{key[1]}: {words}")
        await _actor_event(actor, admission, words)  # first: whoever sees the status finds it
        await actor_sync.write_status(namespace, key[1], status)
        if admission.admitted < admitted_replicas(actor):
            # Scaled down here and now, the caller's own actor and a Degraded one too: the
            # quota it gives up may be another's next, whose Deployment grows below.
            running = min(desired_replicas(actor), admission.admitted)
            await actor_sync.scale_down(namespace, key[1], running)
        if key != skip:
            await actor_sync.reapply(namespace, key[1], config)
    metrics.record_pending(waiting)


def _admission_words(actor: Any, admission: ActorAdmission) -> str:
    # The message, when there is one, starts with the counts ("3 of 5 replicas admitted, ...").
    text = admission.message or f"{admission.admitted} of {desired_replicas(actor)} admitted"
    if admission.preempted_by is not None:
        text += f" (preempted by {admission.preempted_by})"
    return text


async def _actor_event(actor: Any, admission: ActorAdmission, words: str) -> None:
    before = admitted_replicas(actor)
    if admission.preempted_by is not None:
        metrics.PREEMPTIONS.inc()
        await post_event(actor, warning=True, reason="Preempted", message=words)
    elif admission.admitted > before:
        held = f"{admission.admitted} replicas hold quota in flavor {admission.flavor}"
        await post_event(actor, warning=False, reason="Admitted", message=f"{held}: {words}")


async def _report(
    group: ActorGroup, changes: Sequence[Change], logger: kopf.Logger | logging.Logger
) -> None:
    where = f"{group.metadata['namespace']}/{group.metadata['name']}"
    for change in changes:
        logger.info(f"admission: {where}[{change.instance}]: {change.message}")
        if change.happened is Happened.PREEMPTED:
            metrics.PREEMPTIONS.inc()
        if change.happened in (Happened.EVICTED, Happened.DEACTIVATED):
            metrics.GANG_EVICTIONS.inc()
        await post_event(
            group,
            warning=change.happened in _WARNINGS,
            reason=str(change.happened),
            message=f"instance {change.instance}: {change.message}",
        )


async def post_event(owner: Owner, *, warning: bool, reason: str, message: str) -> None:
    """Post a Kubernetes Event about `owner`; a failure is logged, never raised (an Event is a
    report, not a decision)."""

    def post() -> None:
        with cluster.api_client() as api:
            cluster.post_event(api, owner, warning=warning, reason=reason, message=message)

    try:
        await asyncio.to_thread(post)
    except Exception as exc:  # the API server's answer, whatever it is: reported, not fatal
        _log.warning(f"event {reason} not posted for {owner.metadata.get('name')}: {exc}")


def _next_deadline(
    groups: Mapping[Key, ActorGroup], states: Mapping[Key, Mapping[int, InstanceStatus]]
) -> float | None:
    deadlines = [gangs.next_deadline(group, states[key]) for key, group in groups.items()]
    return min((d for d in deadlines if d is not None), default=None)


class ReadinessClock:
    """Runs an admission pass when the earliest gang readiness deadline or requeue time comes
    (nothing else would: no object changes then). One task, owned by the operator's startup
    and cancelled at its cleanup; `wake_at` moves the alarm."""

    def __init__(self, run: Callable[[], Awaitable[None]], *, retry_s: float) -> None:
        self._run = run
        self._retry_s = retry_s
        self._at: float | None = None
        self._moved = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def wake_at(self, at: float | None) -> None:
        """Run a pass at `at` (Unix seconds; None: no alarm)."""
        if at != self._at:
            self._at = at
            self._moved.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="asya readiness clock")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        while True:
            self._moved.clear()
            # A little late rather than early: the monotonic clock the wait runs on and the
            # wall clock the deadlines are in may drift apart by a few milliseconds.
            delay = None if self._at is None else max(0.0, self._at - time.time()) + 0.05
            try:
                async with asyncio.timeout(delay):
                    await self._moved.wait()
                continue
            except TimeoutError:
                pass
            self._at = None
            try:
                await self._run()
            except Exception as exc:  # a failed pass is tried again, never ends the clock
                _log.warning(f"admission pass at a readiness deadline failed: {exc}")
                self.wake_at(time.time() + self._retry_s)
