"""One AsyncActor's objects, queues and status, kept in line with its CR.

Each method reads what it needs through `Kube`, asks the plans what to write (`actor_objects`,
`actor_status`) and writes it; it decides nothing of its own beyond when to try again.
Admission is the admission loop's: an actor with a pool waits for the pass that covers its
change (`settle`), and its objects and status are written between passes (`between_passes`).
An actor's pool is its effective one (`plans.pools`): `spec.pool`, else its namespace's
`asya.sh/default-pool` label, read with the actor each time; with the operator's
`require_pool_for_accelerators`, one asking for GPUs with neither is Degraded (`PoolRequired`).

- **reconcile** (create, resume, update): its Secret and flavor are looked up; if one is
  missing (or it needs a pool and has none, or an ActorGroup's member keeps its name:
  `plans.names`) the actor is `Degraded` (naming it), nothing is applied, and kopf
  tries again every `recheck_s` until it is there. Otherwise its Deployment,
  TriggerAuthentication and ScaledObject and the namespace's end actors are applied, its queues
  and the end actors' declared, and its status written (with `observedGeneration`: all of that
  is done). Only then can `Ready` be True: a client that waits for it finds the queue. While
  Degraded, `Ready` is False with the reason and `observedGeneration` stays the last generation
  done. A broker that cannot be reached leaves the actor `Degraded` (`BrokerUnreachable`, with
  the error), tried again every `recheck_s`; the other writers keep that reason until a declare
  succeeds. An object the API server refuses as invalid (strict field validation finding a
  misspelt field in a free-form volume source, say) leaves it `Degraded` (`ApplyRefused`, with
  the server's words), kept the same way until an apply succeeds. An actor that becomes
  Degraded, or Degraded for another reason, gets a Warning Event with the condition's reason
  and message (posted before the status is written). A stored spec the operator cannot take
  (`StoredSpecError`) is Degraded `InvalidSpec` with an Event, and tried again only when the
  spec changes.
- **follow** (its Deployment's or its broker Secret's change): the status again, its
  `observedGeneration` as the reconcile left it.
- **follow_default_pool** (its namespace's `asya.sh/default-pool` label changed, and it has no
  pool of its own): the reconcile again, from the actor as stored now.
- **release** (delete, behind kopf's finalizer): the end actors lose this owner, a pass frees
  its quota, then its queues are deleted unless `keepQueues`, or unless a group's member runs
  as its name too (the queue is the group's: `plans.names`). Deletion is never blocked for
  ever: with no Secret (or no `amqp-url` in it) the queues are left on the broker and a
  warning says so; with the broker unreachable it is tried `queues.DELETE_ATTEMPTS` times,
  then the queues are left the same way.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Final

import kopf

from asya.errors import TransportError
from asya_operator import metrics
from asya_operator.api.actor import AsyncActor, AsyncActorStatus
from asya_operator.api.decoding import StoredSpecError, decode
from asya_operator.api.metadata import Owner, actor_name, secret_name
from asya_operator.api.template import BROKER_AMQP_URL_KEY
from asya_operator.config import OperatorConfig
from asya_operator.identities import Identities
from asya_operator.kube import ApplyRefusedError, Kube, World
from asya_operator.plans.actor_objects import end_actor_owners, plan_actor, plan_end_actors
from asya_operator.plans.actor_status import (
    apply_refused,
    broker_unreachable,
    find_problems,
    left_its_pool,
    newly_degraded,
    plan_refused_status,
    plan_status,
    status_seen_since,
)
from asya_operator.plans.conditions import Problem, Reason
from asya_operator.plans.names import name_keepers, shared, shared_names
from asya_operator.plans.pools import with_effective_pool
from asya_operator.plans.scaling import running_replicas
from asya_operator.plans.statuses import StatusPatch
from asya_operator.queues import declare_actor_queues, release_queues

DEGRADED: Final = "Degraded"
"""How a handler error that leaves the actor Degraded starts (metrics count these apart)."""


class ActorReconciler:
    """Keeps AsyncActors' objects, queues and status in line (see the module docstring)."""

    def __init__(
        self,
        kube: Kube,
        config: OperatorConfig,
        *,
        settle: Callable[[], Awaitable[None]],
        between_passes: Callable[[], AbstractAsyncContextManager[None]],
        identities: Identities | None = None,
    ) -> None:
        self._kube = kube
        self._config = config
        self._identities = identities or Identities(kube, config)
        self._settle = settle
        self._between_passes = between_passes
        self._applying: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    def _one_at_a_time(self, namespace: str, name: str) -> asyncio.Lock:
        """The lock an actor's applies take: kopf's reconcile and one a namespace's label
        asked for may not interleave (an older spec applied over a newer one)."""
        lock = self._applying.get((namespace, name))
        if lock is None:
            lock = self._applying[namespace, name] = asyncio.Lock()
        return lock

    async def reconcile(self, body: Mapping[str, Any], namespace: str, logger: kopf.Logger) -> None:
        """Apply an AsyncActor's objects and declare its queues, or report what it lacks.

        Raises:
            kopf.TemporaryError: its Secret or flavor is missing, or the broker is
                unreachable: kopf calls this again after `recheck_s`.
            kopf.PermanentError: its stored spec cannot be taken: tried again on a change.
        """
        async with _counted():
            try:
                actor = decode(body, AsyncActor)
            except StoredSpecError as exc:
                await self._refuse(body, namespace, exc)
                # Tried again when the spec changes (an update), not before.
                raise kopf.PermanentError(f"{DEGRADED}, nothing applied: {exc}") from exc
            async with self._one_at_a_time(namespace, actor_name(actor)):
                await self._apply(await self._with_pool(actor, namespace), namespace, logger)

    async def _apply(self, actor: AsyncActor, namespace: str, logger: kopf.Logger) -> None:
        recheck_s = self._config.recheck_s
        if left_its_pool(actor):
            # A pass gives what it held there to others (its status, written below, drops the
            # admitted count).
            await self._settle()
        if self._under_quota(actor):
            # The pass writes this actor's admitted replicas; plan from what it wrote.
            await self._settle()
            fresh = await self._read(namespace, actor_name(actor))
            actor = actor if fresh is None else fresh
        world = await self._kube.world(actor, namespace)
        if self._identities.enabled:
            try:
                await self._identities.ensure(namespace, actor.spec.broker.secret_name)
            except TransportError as exc:
                problem = broker_unreachable(exc)
                await self._report_seen(
                    namespace, actor_name(actor), world.deployment_status, [problem]
                )
                raise kopf.TemporaryError(
                    f"broker identity not made: {exc}; trying again in {recheck_s} s",
                    delay=recheck_s,
                ) from exc
            world = await self._kube.world(actor, namespace)
        problems = self._problems(actor, namespace, world)
        if problems:
            # Nothing applied: the observed generation stays the last one that was.
            await self._report_seen(namespace, actor_name(actor), world.deployment_status, problems)
            messages = "; ".join(p.message for p in problems)
            raise kopf.TemporaryError(
                f"{DEGRADED}, nothing applied: {messages}; checking again in {recheck_s} s",
                delay=recheck_s,
            )
        owners = end_actor_owners(world.owners, current=actor)
        bodies = plan_actor(actor, namespace, world.flavor, self._config)
        bodies += _end_actors(namespace, owners, self._config, logger)
        try:
            deployment, *_others = await self._apply_between_passes(actor, namespace, bodies)
        except ApplyRefusedError as exc:
            # The spec (a free-form field, say) makes an object the server refuses: Degraded
            # with its words, tried again every recheck_s (a webhook or a CRD may be fixed too).
            problem = apply_refused(exc)
            await self._report_seen(
                namespace, actor_name(actor), world.deployment_status, [problem]
            )
            raise kopf.TemporaryError(
                f"{DEGRADED}: {problem.message}; trying again in {recheck_s} s", delay=recheck_s
            ) from exc
        assert world.secret is not None  # find_problems checked it and its keys
        try:
            url = world.secret[BROKER_AMQP_URL_KEY]
            await declare_actor_queues(url, namespace, actor_name(actor))
        except TransportError as exc:
            problem = broker_unreachable(exc)
            seen = deployment.get("status")
            await self._report_seen(namespace, actor_name(actor), seen, [problem])
            raise kopf.TemporaryError(
                f"queues not declared: {exc}; trying again in {recheck_s} s", delay=recheck_s
            ) from exc
        # Written last: an observedGeneration means the objects are applied and the queues exist.
        await self._report_applied(actor, namespace, deployment.get("status"))

    async def _apply_between_passes(
        self, actor: AsyncActor, namespace: str, bodies: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Apply an actor's planned objects (its Deployment first). With a pool, between
        admission passes and with the replicas its status admits now: a pass may have shrunk
        it since `bodies` were planned, and the quota it gave up may already run elsewhere."""
        if not self._under_quota(actor):
            return await self._kube.apply(bodies)
        async with self._between_passes():
            current = await self._read(namespace, actor_name(actor))
            if current is None:
                return await self._kube.apply(bodies)
            deployment, *others = bodies
            # Being deleted, it is in no pass: the quota its status still shows is another's.
            leaving = current.metadata.get("deletionTimestamp") is not None
            replicas = 0 if leaving else running_replicas(current)
            sized = {**deployment, "spec": {**deployment["spec"], "replicas": replicas}}
            return await self._kube.apply([sized, *others])

    async def follow(self, namespace: str, name: str) -> None:
        """Write the status of the actor `namespace/name` as the cluster shows it now (its
        Deployment's replicas, its Secret and flavor), unless it is gone or going, or its
        stored spec is one the operator refuses (its own reconcile reported that)."""
        actor = await self._staying(namespace, name)
        if actor is None:
            return
        world = await self._kube.world(actor, namespace)
        problems = self._problems(actor, namespace, world)
        await self._report_seen(namespace, name, world.deployment_status, problems)

    async def follow_default_pool(self, namespace: str, name: str, logger: kopf.Logger) -> None:
        """Reconcile the actor `namespace/name` again, its namespace's default pool having
        changed (it has none of its own): into that pool, into another or out of quota, as
        its reconcile does; nothing if it is gone or going, or its stored spec is one the
        operator refuses (its own reconcile reported that).

        Raises:
            kopf.TemporaryError: as `reconcile` (its status says why).
        """
        async with self._one_at_a_time(namespace, name):
            # Read under the lock: the spec as stored once any reconcile in flight is done.
            actor = await self._staying(namespace, name)
            if actor is None:
                return
            async with _counted():
                await self._apply(actor, namespace, logger)

    async def _staying(self, namespace: str, name: str) -> AsyncActor | None:
        """The actor as stored; None if it is gone or going, or its stored spec is one the
        operator refuses (its own reconcile reported that)."""
        try:
            actor = await self._read(namespace, name)
        except StoredSpecError:
            return None
        if actor is None or actor.metadata.get("deletionTimestamp"):
            return None
        return actor

    async def release(
        self, body: Mapping[str, Any], namespace: str, retry: int, logger: kopf.Logger
    ) -> None:
        """Drop the actor from the end actors' owners and delete its queues (unless
        `keepQueues`).

        Raises:
            kopf.TemporaryError: the broker is unreachable (at most `DELETE_ATTEMPTS` times).
        """
        name = str(body["metadata"]["name"])
        try:
            actor = await self._with_pool(decode(body, AsyncActor), namespace)
        except StoredSpecError as exc:
            await self._release_refused(body, namespace, retry, logger, exc)
            return
        world = await self._kube.world(actor, namespace)
        owners = end_actor_owners(world.owners, leaving=("AsyncActor", name))
        if owners:
            # With no owner left, Kubernetes' garbage collector deletes the end actors itself.
            await self._kube.apply(_end_actors(namespace, owners, self._config, logger))
        if self._under_quota(actor):
            # Its quota is free now (a deleted actor is out of every pass): others may have it.
            await self._settle()
        await release_queues(
            (world.secret or {}).get(BROKER_AMQP_URL_KEY),
            namespace,
            [name],
            shared=shared_names(actor, world.name_owners.staying),
            keep=actor.spec.keep_queues,
            attempt=retry,
            recheck_s=self._config.recheck_s,
            logger=logger,
        )
        await self._identities.release(namespace)

    def _under_quota(self, actor: AsyncActor) -> bool:
        """Whether asya's own admission decides the actor's replicas (with Kueue admitting,
        its pool is a LocalQueue and every desired replica's pod exists, gated by Kueue)."""
        return actor.spec.pool is not None and self._config.admission == "builtin"

    async def _with_pool(self, actor: AsyncActor, namespace: str) -> AsyncActor:
        """`actor` with its effective pool: its own, else its namespace's default."""
        return with_effective_pool(actor, await self._kube.namespace_labels(namespace))

    async def _read(self, namespace: str, name: str) -> AsyncActor | None:
        """The actor `namespace/name` as stored now, with its effective pool (None: gone).

        Raises:
            StoredSpecError: its stored spec is one the operator refuses.
        """
        actor = await self._kube.read(AsyncActor, namespace, name)
        return None if actor is None else await self._with_pool(actor, namespace)

    def _problems(self, actor: AsyncActor, namespace: str, world: World) -> list[Problem]:
        return find_problems(
            actor,
            namespace,
            secret_keys=world.secret_keys,
            flavor=world.flavor,
            keepers=name_keepers(world.name_owners.everyone),
            pool_required=self._config.require_pool_for_accelerators,
        )

    async def _release_refused(
        self,
        body: Mapping[str, Any],
        namespace: str,
        retry: int,
        logger: kopf.Logger,
        error: StoredSpecError,
    ) -> None:
        """Delete an actor whose spec never decoded, as far as its stored body tells: nothing
        was applied for it, so only its queues (which an earlier, valid spec may have
        declared) go."""
        logger.warning("deleted with a spec the operator refuses", extra={"error": str(error)})
        spec = body.get("spec") or {}
        secret = await self._kube.read_secret(namespace, secret_name(spec))
        name = str(body["metadata"]["name"])
        others = (await self._kube.name_owners(namespace)).staying
        await release_queues(
            (secret or {}).get(BROKER_AMQP_URL_KEY),
            namespace,
            [name],
            shared=shared([name], others, leaving=("AsyncActor", name)),
            keep=spec.get("keepQueues") is True,
            attempt=retry,
            recheck_s=self._config.recheck_s,
            logger=logger,
        )

    async def _refuse(
        self, body: Mapping[str, Any], namespace: str, error: StoredSpecError
    ) -> None:
        """Report a stored spec the operator cannot take: Degraded, and a Warning Event."""
        message = str(error)
        status = plan_refused_status(message, now=datetime.now(UTC))
        # The Event first: whoever sees the status finds it posted.
        await self._kube.post_event(
            body, warning=True, reason=str(Reason.INVALID_SPEC), message=message
        )
        async with self._between_passes():
            await self._kube.patch_status(AsyncActor, namespace, body["metadata"]["name"], status)

    async def _report_applied(
        self, actor: AsyncActor, namespace: str, deployment_status: Mapping[str, Any] | None
    ) -> None:
        """Write the status of an actor whose generation (as `actor` has it) is applied and
        whose queues are declared: that generation is observed now."""
        generation = actor.metadata.get("generation")

        def build(current: AsyncActor) -> StatusPatch[AsyncActorStatus]:
            now = datetime.now(UTC)
            return plan_status(
                current,
                deployment_status,
                [],
                observed_generation=generation,
                now=now,
                quota=self._config.admission == "builtin",
            )

        await self._write_status(namespace, actor_name(actor), build)

    async def _report_seen(
        self,
        namespace: str,
        name: str,
        deployment_status: Mapping[str, Any] | None,
        problems: Sequence[Problem],
    ) -> None:
        """Write the actor's status as seen now, its observed generation left as it is."""

        def build(current: AsyncActor) -> StatusPatch[AsyncActorStatus]:
            return status_seen_since(
                current,
                deployment_status,
                problems,
                now=datetime.now(UTC),
                quota=self._config.admission == "builtin",
            )

        await self._write_status(namespace, name, build)

    async def _write_status(
        self,
        namespace: str,
        name: str,
        build: Callable[[AsyncActor], StatusPatch[AsyncActorStatus]],
    ) -> None:
        # Read again and written between admission passes, one writer at a time: the
        # admission conditions it carries over are then the last pass's, and no writer puts
        # back a status (an observed generation, a Ready) read before another's.
        async with self._between_passes():
            current = await self._read(namespace, name)
            if current is None:
                return
            status = build(current)
            news = newly_degraded(current, status)
            if news is not None:  # first: whoever sees the status finds the Event posted
                await self._kube.post_event(
                    current, warning=True, reason=str(news.reason), message=str(news.message)
                )
            await self._kube.patch_status(AsyncActor, namespace, name, status)


def _end_actors(
    namespace: str, owners: list[Owner], config: OperatorConfig, logger: kopf.Logger
) -> list[dict[str, Any]]:
    try:
        return plan_end_actors(namespace, owners, config)
    except ValueError as exc:
        # The actors' own objects are still applied; only the shared end actors wait.
        logger.error("end actors not applied", extra={"error": str(exc)})
        return []


@asynccontextmanager
async def _counted() -> AsyncIterator[None]:
    # One reconciliation's outcome and duration; the handler's own errors pass through.
    started = time.monotonic()
    outcome = "error"
    try:
        yield
        outcome = "applied"
    except kopf.TemporaryError as exc:
        outcome = "degraded" if str(exc).startswith(DEGRADED) else "broker_unreachable"
        raise
    finally:
        metrics.RECONCILES.labels(outcome=outcome).inc()
        metrics.RECONCILE_SECONDS.observe(time.monotonic() - started)
