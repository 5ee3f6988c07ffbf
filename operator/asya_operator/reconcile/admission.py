"""The admission loop: one task that owns admission for the whole operator.

Handlers never run admission themselves: they tell the loop that something changed
(`request()`, or `settle()` to wait for the pass that covers the change). The loop coalesces
bursts (every request made before a pass starts is covered by that one pass), and runs passes
one at a time. A pass:
1. reads the world (`Kube.admission_world`), which pooled actors and groups are being deleted
   among it;
2. moves each group's instances on (`instances.before_pass`: readiness timeouts, requeues);
3. asks the engine (`plans.admission.admit`) for every pooled actor's replicas and every pooled
   group's pending instances, and records its decisions (`instances.after_pass`);
4. writes each pool's status (usage, and whether it is Active: its flavors found, its quotas
   and the cohorts valid);
5. carries the decisions out, shrinking first: an actor or group being deleted, an actor losing
   replicas and an instance losing its quota are scaled away before anything grows, so what
   runs never exceeds the quota (a preempted pod drains: its sidecar gives its envelopes back
   to the queue); for each change an Event is posted (an admission, a preemption, an
   eviction), then the status written, then the actor's objects re-applied from that status
   and each group's objects applied for the instances that run; an admitted actor or gang
   instance whose pods are not ready, and whose flavor's nodes advertise none of an
   accelerator it asks for, has that named in its status (`AcceleratorsUnavailable`; the
   Nodes are read with the world, and only reported on: admission never reads them);
6. wakes itself at the next readiness deadline or requeue time (nothing else would: no object
   changes then), or after `recheck_s` if the pass failed, or while a status names nodes
   without accelerators (no Node change asks for a pass: the next one clears it).

Time is the loop's `clock` (Unix seconds), an argument: the gang deadlines, the statuses'
transition times and the wake-ups all read it. Whatever must not interleave with a pass (an
actor's objects applied with the replicas its status admits, its status written) runs inside
`between_passes()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from asya.admission.readiness import GangPhase
from asya_operator import metrics
from asya_operator.api.actor import AsyncActor
from asya_operator.api.flavor import ResourceFlavor
from asya_operator.api.group import (
    HOLDING,
    ActorGroup,
    InstanceStatus,
    MemberHold,
    held,
    known_instances,
)
from asya_operator.api.metadata import TEMPLATE_HASH_LABEL, actor_name
from asya_operator.api.pool import Cohort, ResourcePool
from asya_operator.config import GangScheduler, OperatorConfig
from asya_operator.kube import GANG_KEYS, AdmissionWorld, ApplyRefusedError, Kube, MemberPods
from asya_operator.plans import instances, kueue
from asya_operator.plans.actor_objects import plan_actor
from asya_operator.plans.actor_status import (
    find_accelerator_shortage,
    find_problems,
    kueue_admission,
    pending_since,
    plan_admission_status,
    status_seen_since,
)
from asya_operator.plans.admission import admit
from asya_operator.plans.cohort_status import plan_cohort_statuses
from asya_operator.plans.conditions import newly_true
from asya_operator.plans.gangs import gang_scheduler
from asya_operator.plans.group_objects import plan_group, service_name
from asya_operator.plans.group_status import (
    find_group_problems,
    find_group_shortage,
    plan_group_status,
)
from asya_operator.plans.instances import Change, Happened
from asya_operator.plans.names import Claim, name_keepers
from asya_operator.plans.nodes import Node
from asya_operator.plans.pool_status import (
    find_pool_problems,
    plan_pool_status,
    plan_pool_statuses,
    pool_usage,
)
from asya_operator.plans.pools import with_effective_pool
from asya_operator.plans.quota import lending
from asya_operator.plans.scaling import admitted_replicas, desired_replicas
from asya_operator.plans.workloads import ActorAdmission, Decisions, PooledActor, PooledGroup

_log = logging.getLogger(__name__)

Key = tuple[str, str]
"""(namespace, name) of an AsyncActor or an ActorGroup."""

_WARNINGS: Final = frozenset({Happened.PREEMPTED, Happened.EVICTED, Happened.DEACTIVATED})

_LATE_S: Final = 0.05
"""How late an alarm rings: a little late rather than early, since the monotonic clock the
wait runs on and the wall clock the deadlines are in may drift apart by a few milliseconds."""


class AdmissionLoop:
    """The one task that runs admission passes (see the module docstring)."""

    def __init__(
        self, kube: Kube, config: OperatorConfig, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._kube = kube
        self._config = config
        self._clock = clock
        self._wanted = asyncio.Event()
        self._next: asyncio.Future[None] | None = None
        self._refresh: set[Key] = set()
        self._passing = asyncio.Lock()
        self._alarm: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._taken = 0
        self._keepers: dict[str, Mapping[str, Claim]] = {}
        """Who keeps each actor name, per namespace, read once a pass (`_keepers_in`)."""
        self.passes = 0
        """Passes run so far (failed ones included)."""

    def request(self, *, refresh: Key | None = None) -> int:
        """Ask for a pass; the number of the pass that will cover it (every request made
        before a pass starts is covered by that one). `refresh` is an ActorGroup whose objects
        that pass applies even if what it runs is unchanged (its spec changed)."""
        if refresh is not None:
            self._refresh.add(refresh)
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
            # Retrieved here, so that a failed pass nobody waits for is not reported as lost.
            self._next.add_done_callback(_retrieve)
        self._wanted.set()
        return self._taken + 1

    async def settle(self, *, refresh: Key | None = None) -> None:
        """Ask for a pass and wait until it has run.

        Raises:
            AdmissionPassError: the pass failed (the API server's error, ...); the loop tries
                again after `recheck_s`, and so may the caller.
            RuntimeError: the loop is not running.
        """
        if self._task is None or self._task.done():
            raise RuntimeError("the admission loop is not running")
        self.request(refresh=refresh)
        assert self._next is not None
        try:
            # Shielded: a waiter cancelled (kopf cancels handlers) never cancels the pass.
            await asyncio.shield(self._next)
        except AdmissionPassError as exc:
            raise AdmissionPassError(str(exc)) from exc.__cause__

    @contextlib.asynccontextmanager
    async def between_passes(self) -> AsyncIterator[None]:
        """No pass runs while this is held: what is read and written inside sees the last
        pass's decisions, and the next pass sees what was written."""
        async with self._passing:
            yield

    def start(self) -> None:
        """Run the loop as a task of the running event loop (once: a second call while it
        runs does nothing)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name="asya admission loop")

    async def stop(self) -> None:
        """Cancel the loop's task and wait for it."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def run(self) -> None:
        """Run passes for ever: whenever asked, and when the alarm rings. Whoever waits for a
        pass when the loop stops is told so, never left waiting."""
        covered: asyncio.Future[None] | None = None
        try:
            while True:
                await self._wait()
                self._wanted.clear()
                covered, self._next = self._next, None
                self._taken += 1
                refresh, self._refresh = self._refresh, set()
                try:
                    async with self._passing:
                        self._alarm = await self.run_pass(refresh)
                except Exception as exc:  # tried again after recheck_s; the askers see it
                    _log.warning("admission pass failed", extra={"error": str(exc)})
                    self._refresh |= refresh
                    self._alarm = self._clock() + self._config.recheck_s
                    failed = AdmissionPassError(f"admission pass failed: {exc}")
                    failed.__cause__ = exc
                    _settle(covered, failed)
                else:
                    _settle(covered, None)
                covered = None
        finally:
            stopped = RuntimeError("the admission loop stopped")
            _settle(covered, stopped)
            _settle(self._next, stopped)
            self._next = None

    async def _wait(self) -> None:
        if self._wanted.is_set():
            return
        delay = None if self._alarm is None else max(0.0, self._alarm - self._clock()) + _LATE_S
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._wanted.wait()
        self._alarm = None

    async def run_pass(self, refresh: Collection[Key] = ()) -> float | None:
        """One admission pass (see the module docstring), at the loop's clock; when the next
        one is due on its own (a readiness deadline or requeue time; None: none is)."""
        self.passes += 1
        metrics.ADMISSION_PASSES.inc()
        self._keepers = {}
        world = await self._kube.admission_world()
        now = self._clock()
        ready = {
            (ns, g.metadata["name"]): _ready_instances(
                g, world.group_pods.get((ns, g.metadata["name"]), [])
            )
            for ns, g in world.groups
        }
        # What the gang schedulers say of the instances they cannot place whole.
        schedulers = {gang_scheduler(g, self._config) for _ns, g in world.groups} - {"none"}
        gangs = await self._kube.gang_states(schedulers)
        unplaced: dict[Key, dict[int, str]] = {}
        for (ns, name, instance), why in gangs.unplaced.items():
            unplaced.setdefault((ns, name), {})[instance] = why
        if self._config.admission == "kueue":
            await self._kueue_pass(world, unplaced, gangs.served, now, refresh)
            return None  # Kueue keeps the clocks (its waitForPodsReady): no deadline of ours
        states, changes = _groups_before(world, ready, now, unplaced)
        ages = _ages(world)
        pooled = _pooled_actors(world, ages)
        pooled_groups = [
            instances.pooled_group(
                group,
                states[ns, group.metadata["name"]],
                age=ages["ActorGroup", ns, group.metadata["name"]],
            )
            for ns, group in world.groups
            if group.spec.pool is not None
        ]
        decided = admit(world.pools, world.cohorts, world.namespace_labels, pooled, pooled_groups)
        for pooled_group in pooled_groups:
            key = (pooled_group.namespace, pooled_group.name)
            states[key], after = instances.after_pass(states[key], decided.groups[key], now)
            changes[key] += after
        for key in states:
            states[key] = instances.placement(states[key], unplaced.get(key, {}))
        flavors = await self._write_pool_statuses(world, pooled, pooled_groups, decided, now)
        groups = {(ns, g.metadata["name"]): g for ns, g in world.groups}
        # Shrinking first: a preemptor's pods never start before its victim's are scaled away,
        # nor a deleted actor's or group's quota taken before its pods are.
        await self._stop_leaving(world.leaving)
        restarted = self._restarted(world)
        for key, group in groups.items():
            running = set() if key in restarted else set(instances.holding(states[key]))
            await self._stop_instances_but(group, key[0], running, world.group_pods.get(key, []))
        refresh = {*refresh, *restarted}
        for namespace, actor in world.actors:
            # Every Deployment down to what it may run now, before any status or growth: an
            # actor new to its pool may run more than its status says it holds.
            admitted = decided.actors[namespace, actor_name(actor)].admitted
            allowed = min(desired_replicas(actor), admitted)
            await self._kube.scale_down(namespace, actor_name(actor), allowed)
        lacking = await self._carry_out_actors(world, decided, flavors, now)
        for key, group in groups.items():
            # Events first: whoever sees the new status finds them posted.
            await self._report(group, changes[key])
            seen = ready.get(key, {})
            unserved = self._unserved_gang_scheduler(group, gangs.served)
            lacking |= await self._sync_group(
                group,
                key[0],
                states[key],
                seen,
                world.nodes,
                now,
                refresh,
                unserved,
                pods=[] if key in restarted else world.group_pods.get(key, []),
            )
        deadline = _next_deadline(groups, states)
        if lacking:  # the next pass says whether the nodes advertise them now
            recheck = now + self._config.recheck_s
            deadline = recheck if deadline is None else min(deadline, recheck)
        return deadline

    def _unserved_gang_scheduler(
        self, group: ActorGroup, served: Collection[GangScheduler]
    ) -> GangScheduler | None:
        """The group's gang scheduler where the cluster serves no PodGroups of it (else None)."""
        scheduler = gang_scheduler(group, self._config)
        return None if scheduler in served or scheduler == "none" else scheduler

    def _restarted(self, world: AdmissionWorld) -> set[Key]:
        """The groups whose running pods were made for another gang scheduler than theirs now:
        they restart whole (their objects deleted and applied again in this pass)."""
        found = set()
        for namespace, group in world.groups:
            key = (namespace, str(group.metadata["name"]))
            wanted = gang_scheduler(group, self._config)
            if any(p.gang_scheduler != wanted for p in world.group_pods.get(key, [])):
                _log.info(
                    "restarted whole",
                    extra={"object": f"{key[0]}/{key[1]}", "gang_scheduler": wanted},
                )
                found.add(key)
        return found

    async def _kueue_pass(
        self,
        world: AdmissionWorld,
        unplaced: Mapping[Key, Mapping[int, str]],
        served: Collection[GangScheduler],
        now: float,
        refresh: Collection[Key],
    ) -> None:
        """A pass with Kueue admitting (`plans.kueue`): every desired instance runs its
        StatefulSets at full size (their pods gated by Kueue until it admits the instance's
        pod group), and each group's and pooled actor's status says what Kueue decided."""
        found = await self._kube.kueue_workloads()
        workloads = found.items or {}
        missing = None if found.served else KUEUE_MISSING
        if found.unreadable is not None:  # unknown this pass: statuses stay as they are
            _log.warning("Kueue's Workloads not read", extra={"error": found.unreadable})
        await self._stop_leaving(world.leaving)
        restarted = self._restarted(world)
        refresh = {*refresh, *restarted}
        for namespace, group in world.groups:
            key = (namespace, str(group.metadata["name"]))
            pods = world.group_pods.get(key, [])
            # At full size, not by what the status holds: Kueue lifts its gate as it admits, so
            # the pods may be ready before a pass has recorded that admission, and no event
            # would come after that one to look again.
            seen = _ready_at_full_size(group, pods)
            states = instances.placement(instances.unpooled(group, seen), unplaced.get(key, {}))
            # Without Kueue nothing would gate the pods: none run, rather than run unadmitted.
            stopping = key in restarted or missing is not None
            await self._stop_instances_but(
                group, namespace, set() if stopping else set(states), pods
            )
            if stopping:
                pods = []
            if found.unreadable is not None:
                shown = known_instances(group)
            else:
                shown = instances.placement(
                    _kueue_instances(group, namespace, states, workloads, seen, missing),
                    unplaced.get(key, {}),
                )
            flavor_of = {m.name: m.template.flavor for m in group.spec.members}
            applied: dict[int, dict[str, MemberHold]] = {}
            for p in pods:
                applied.setdefault(p.instance, {})[p.member] = (flavor_of.get(p.member), p.replicas)
            unserved = self._unserved_gang_scheduler(group, served)
            await self._sync_group(
                group,
                namespace,
                states,
                seen,
                world.nodes,
                now,
                refresh,
                unserved,
                shown=shown,
                applied=applied,
                kueue_missing=missing,
                pods=pods,
            )
        at = datetime.fromtimestamp(now, UTC)
        for namespace, actor in [] if found.unreadable is not None else world.actors:
            name = actor_name(actor)
            mine = kueue.actor_workloads(
                name, [w for (ns, _n), w in workloads.items() if ns == namespace]
            )
            admission = kueue_admission(actor, mine, missing)
            status = plan_admission_status(actor, admission, now=at)
            if status.changed(actor.status):
                await self._kube.patch_status(AsyncActor, namespace, name, status)

    async def _write_pool_statuses(
        self,
        world: AdmissionWorld,
        pooled: Sequence[PooledActor],
        groups: Sequence[PooledGroup],
        decided: Decisions,
        now: float,
    ) -> dict[str, ResourceFlavor]:
        """Write each pool's and each Cohort's status; the flavors the pools' quotas name that
        exist."""
        used = pool_usage(world.pools, pooled, groups, decided)
        found = lending(world.pools, used.usage, world.cohorts)
        planned = plan_pool_statuses(world.pools, used, found)
        metrics.record_pools(planned)
        named = {q.flavor for pool in world.pools for q in pool.spec.quotas or ()}
        flavors = await self._kube.read_flavors(named)
        at = datetime.fromtimestamp(now, UTC)
        for pool in world.pools:
            name = str(pool.metadata["name"])
            problems = find_pool_problems(pool, set(flavors), world.cohorts)
            patch = plan_pool_status(pool, planned[name], problems, now=at)
            if patch.changed(pool.status):
                await self._kube.patch_status(ResourcePool, None, name, patch)
        cohorts = {str(c.metadata["name"]): c for c in world.cohorts}
        planned_cohorts = plan_cohort_statuses(world.cohorts, found)
        for name, cohort_patch in planned_cohorts.items():
            if cohort_patch.changed(cohorts[name].status):
                await self._kube.patch_status(Cohort, None, name, cohort_patch)
        return flavors

    async def _stop_leaving(self, leaving: Sequence[tuple[str, str, str]]) -> None:
        """Stop the pods of each actor and group being deleted: they are in no pass, so the
        quota they hold is free for others (their own delete handlers do the rest)."""
        for kind, namespace, name in leaving:
            if kind == "AsyncActor":
                await self._kube.scale_down(namespace, name, 0)
            else:
                await self._kube.delete_group_objects(namespace, name)

    async def _stop_instances_but(
        self,
        group: ActorGroup,
        namespace: str,
        running: Collection[int],
        pods: Collection[MemberPods],
    ) -> None:
        """Delete the StatefulSets, Service and gang PodGroup of every instance of `group` not
        `running` (the PodGroup of each gang scheduler: the group may have changed its own)."""
        name = group.metadata["name"]
        stopped = sorted({p.instance for p in pods if p.instance not in running})
        doomed = [("StatefulSet", p.name) for p in pods if p.instance not in running]
        doomed += [("Service", service_name(name, i)) for i in stopped]
        doomed += [(key, service_name(name, i)) for i in stopped for key in GANG_KEYS.values()]
        await self._kube.delete(namespace, doomed)

    async def _carry_out_actors(
        self,
        world: AdmissionWorld,
        decided: Decisions,
        flavors: Mapping[str, ResourceFlavor],
        now: float,
    ) -> bool:
        """Write each actor's admission status and carry out what moved; whether some status
        names a flavor whose nodes lack an accelerator."""
        at = datetime.fromtimestamp(now, UTC)
        lacking = False
        waiting: dict[Key, float] = {}

        def growth(item: tuple[str, AsyncActor]) -> int:
            namespace, actor = item
            return decided.actors[namespace, actor_name(actor)].admitted - admitted_replicas(actor)

        # Shrinking actors first, as groups: the Deployments together never run more than quota.
        for namespace, actor in sorted(world.actors, key=growth):
            key = (namespace, actor_name(actor))
            admission = decided.actors[key]
            flavor = flavors.get(admission.flavor) if admission.flavor else None
            shortage = find_accelerator_shortage(actor, admission, flavor, world.nodes)
            lacking |= shortage is not None
            status = plan_admission_status(actor, admission, now=at, shortage=shortage)
            since = pending_since(status)
            if since is not None:
                waiting[key] = since
            if not status.changed(actor.status):
                continue
            held = (admission.admitted, admission.flavor if admission.admitted else None)
            moved = held != (admitted_replicas(actor), _admitted_flavor(actor))
            if moved or admission.preempted_by is not None:
                words = _admission_words(actor, admission)
                fields = {"object": f"{key[0]}/{key[1]}", "decision": words}
                _log.info("admission", extra=fields)
                await self._actor_event(actor, admission, words)  # first: the status's readers
            await self._kube.patch_status(AsyncActor, namespace, key[1], status)
            if moved:  # its Deployment and ScaledObject follow (the shrink is done already)
                await self._reapply(namespace, key[1], at)
        metrics.record_pending(waiting)
        return lacking

    async def _reapply(self, namespace: str, name: str, at: datetime) -> None:
        """Apply an actor's objects from its status as just written (its Deployment follows
        what is admitted). A Degraded actor, or one being deleted, is left to its handlers."""
        actor = await self._kube.read(AsyncActor, namespace, name)
        if actor is None or actor.metadata.get("deletionTimestamp"):
            return
        # Sized by its pool, its namespace's default one too: the Deployment runs what is admitted.
        actor = with_effective_pool(actor, await self._kube.namespace_labels(namespace))
        world = await self._kube.world(actor, namespace)
        keepers = name_keepers(world.name_owners.everyone)
        if find_problems(
            actor, namespace, secret_keys=world.secret_keys, flavor=world.flavor, keepers=keepers
        ):
            return
        bodies = plan_actor(actor, namespace, world.flavor, self._config)
        try:
            deployment, *_others = await self._kube.apply(bodies)
        except ApplyRefusedError as exc:
            # Its own reconcile says so in its status (ApplyRefused); the pass goes on.
            where = f"{namespace}/{name}"
            _log.warning("objects refused", extra={"object": where, "error": str(exc)})
            return
        status = status_seen_since(actor, deployment.get("status"), [], now=at)
        await self._kube.patch_status(AsyncActor, namespace, name, status)

    async def _actor_event(self, actor: AsyncActor, admission: ActorAdmission, words: str) -> None:
        before = admitted_replicas(actor)
        if admission.preempted_by is not None:
            metrics.PREEMPTIONS.inc()
            await self._kube.post_event(actor, warning=True, reason="Preempted", message=words)
        elif admission.admitted > before:
            holds = f"{admission.admitted} replicas hold quota in flavor {admission.flavor}"
            message = f"{holds}: {words}"
            await self._kube.post_event(actor, warning=False, reason="Admitted", message=message)

    async def _report(self, group: ActorGroup, changes: Sequence[Change]) -> None:
        where = f"{group.metadata['namespace']}/{group.metadata['name']}"
        for change in changes:
            fields = {"object": where, "instance": change.instance, "decision": change.message}
            _log.info("admission", extra=fields)
            if change.happened is Happened.PREEMPTED:
                metrics.PREEMPTIONS.inc()
            if change.happened in (Happened.EVICTED, Happened.DEACTIVATED):
                metrics.GANG_EVICTIONS.inc()
            await self._kube.post_event(
                group,
                warning=change.happened in _WARNINGS,
                reason=str(change.happened),
                message=f"instance {change.instance}: {change.message}",
            )

    async def _keepers_in(self, namespace: str) -> Mapping[str, Claim]:
        """Who keeps each actor name of `namespace` (`names.name_keepers`), listed once a pass
        however many of its groups the pass syncs."""
        keepers = self._keepers.get(namespace)
        if keepers is None:
            owners = await self._kube.name_owners(namespace)
            keepers = self._keepers[namespace] = name_keepers(owners.everyone)
        return keepers

    async def _sync_group(
        self,
        group: ActorGroup,
        namespace: str,
        states: Mapping[int, InstanceStatus],
        ready: Mapping[int, bool],
        nodes: Sequence[Node] | None,
        now: float,
        refresh: Collection[Key],
        unserved_gang_scheduler: GangScheduler | None = None,
        *,
        shown: Mapping[int, InstanceStatus] | None = None,
        applied: Mapping[int, Mapping[str, MemberHold]] | None = None,
        kueue_missing: str | None = None,
        pods: Collection[MemberPods] = (),
    ) -> bool:
        """Apply the running instances' objects if what runs changed (or the group is to be
        refreshed: its spec changed), and write the status if it says something new. A group
        that lacks something (its Secret, a flavor, a member's actor name another object
        keeps (`plans.names`), its gang scheduler's PodGroup kind) is Degraded and gets no
        objects. Whether its status names a flavor whose nodes lack an accelerator. With Kueue
        admitting, `shown` is what the status says of the instances (Kueue's decisions) and
        `applied` what runs now (the StatefulSets as they are), since the status no longer
        tells that. `pods`: the group's StatefulSets as they are; an instance whose pods run
        another template than planned restarts whole (`stale_instances`)."""
        name = group.metadata["name"]
        running = {i: held(s) for i, s in sorted(states.items()) if s.phase in HOLDING}
        before = applied
        if before is None:
            statuses = known_instances(group).items()
            before = {i: h for i, h in ((i, held(s)) for i, s in statuses) if h}
        wanted = {f for members in running.values() for f, _count in members.values() if f}
        flavors = await self._kube.read_flavors(wanted)
        secret = await self._kube.read_secret(namespace, group.spec.broker.secret_name)
        problems = find_group_problems(
            group,
            namespace,
            secret_keys=None if secret is None else set(secret),
            missing_flavors=wanted - set(flavors),
            keepers=await self._keepers_in(namespace),
            pool_required=self._config.require_pool_for_accelerators,
            unserved_gang_scheduler=unserved_gang_scheduler,
            kueue_missing=kueue_missing,
        )
        if not problems and ((namespace, name) in refresh or running != before):
            planned = plan_group(group, namespace, running, flavors, self._config)
            stale = stale_instances(planned, pods)
            if stale:
                # Whole, never rank by rank: the instance's pods go with its StatefulSets, and
                # the apply makes them anew from the new template, under the same admission.
                _log.info(
                    "restarted whole",
                    extra={"object": f"{namespace}/{name}", "instances": sorted(stale)},
                )
                doomed = [("StatefulSet", p.name) for p in pods if p.instance in stale]
                await self._kube.delete(namespace, doomed)
            await self._kube.apply(planned)
        states = states if shown is None else shown
        shortage = find_group_shortage(group, states, ready, flavors, nodes)
        status = plan_group_status(
            group, states, ready, problems, now=datetime.fromtimestamp(now, UTC), shortage=shortage
        )
        if status.changed(group.status):
            known = group.status.conditions if group.status else None
            news = newly_true("Degraded", known, status.status.conditions)
            if news is not None:  # first: whoever sees the status finds the Event posted
                message = str(news.message)
                await self._kube.post_event(
                    group, warning=True, reason=str(news.reason), message=message
                )
            await self._kube.patch_status(ActorGroup, namespace, name, status)
            if problems:
                why = "; ".join(p.message for p in problems)
                fields = {"object": f"{namespace}/{name}", "problems": why}
                _log.warning("ActorGroup not applied", extra=fields)
        return shortage is not None


def stale_instances(planned: Sequence[Mapping[str, Any]], pods: Collection[MemberPods]) -> set[int]:
    """The instances some of whose StatefulSets run another pod template than `planned` gives
    them (or one from before templates were labelled with their hash)."""
    wanted = {
        str(o["metadata"]["name"]): o["metadata"]["labels"].get(TEMPLATE_HASH_LABEL)
        for o in planned
        if o.get("kind") == "StatefulSet"
    }
    return {p.instance for p in pods if p.name in wanted and p.template_hash != wanted[p.name]}


class AdmissionPassError(RuntimeError):
    """An admission pass failed (the message says why); the loop tries again."""


def _settle(future: asyncio.Future[None] | None, error: BaseException | None) -> None:
    if future is None or future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


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


def _ready_at_full_size(group: ActorGroup, pods: Sequence[MemberPods]) -> dict[int, bool]:
    """For each instance that has pods, whether every member's StatefulSet there is ready with
    the member's full `replicas`: how an instance runs with Kueue admitting it."""
    found = {(p.instance, p.member): p for p in pods}
    return {
        index: all(
            (index, m.name) in found and found[index, m.name].ready >= m.replicas
            for m in group.spec.members
        )
        for index in {p.instance for p in pods}
    }


KUEUE_MISSING: Final = (
    "Kueue is not installed: the cluster serves no kueue.x-k8s.io/v1beta2 Workloads (install"
    " Kueue, or run the operator with admission: builtin)"
)


def _kueue_instances(
    group: ActorGroup,
    namespace: str,
    states: Mapping[int, InstanceStatus],
    workloads: Mapping[Key, Mapping[str, Any]],
    ready: Mapping[int, bool],
    missing: str | None,
) -> dict[int, InstanceStatus]:
    """The instances as Kueue's Workloads say (each `{group}-{instance}`)."""
    name = group.metadata["name"]
    shown = {}
    for index, state in states.items():
        if missing is not None:
            shown[index] = msgspec.structs.replace(
                state, phase=GangPhase.PENDING, members=None, message=missing
            )
            continue
        workload = workloads.get((namespace, f"{name}-{index}"))
        ready_now = ready.get(index, False)
        shown[index] = kueue.instance_from_workload(group, state, workload, ready=ready_now)
    return shown


def _groups_before(
    world: AdmissionWorld,
    ready: Mapping[Key, Mapping[int, bool]],
    now: float,
    unplaced: Mapping[Key, Mapping[int, str]],
) -> tuple[dict[Key, dict[int, InstanceStatus]], dict[Key, list[Change]]]:
    states: dict[Key, dict[int, InstanceStatus]] = {}
    changes: dict[Key, list[Change]] = {}
    for namespace, group in world.groups:
        key = (namespace, group.metadata["name"])
        seen = ready.get(key, {})
        if group.spec.pool is None:
            states[key], changes[key] = instances.unpooled(group, seen), []
        else:
            why = unplaced.get(key, {})
            states[key], changes[key] = instances.before_pass(group, seen, now, why)
    return states, changes


def _admitted_flavor(actor: AsyncActor) -> str | None:
    status = actor.status
    return status.admitted_flavor if status is not None and status.admitted_replicas else None


def _admission_words(actor: AsyncActor, admission: ActorAdmission) -> str:
    # The message, when there is one, starts with the counts ("3 of 5 replicas admitted, ...").
    text = admission.message or f"{admission.admitted} of {desired_replicas(actor)} admitted"
    if admission.preempted_by is not None:
        text += f" (preempted by {admission.preempted_by})"
    return text


def _next_deadline(
    groups: Mapping[Key, ActorGroup], states: Mapping[Key, Mapping[int, InstanceStatus]]
) -> float | None:
    deadlines = [instances.next_deadline(group, states[key]) for key, group in groups.items()]
    return min((d for d in deadlines if d is not None), default=None)
