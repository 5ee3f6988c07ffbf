"""The controller: kopf handlers that keep each AsyncActor's objects, queues and status in sync.

Thin on purpose: each handler reads the world (`cluster`), asks the pure functions what to do
(`plan`, `deployment`, `status`), and carries it out (`cluster` for the API, `queues` for the
broker). It makes no decision of its own beyond when to try again. `registry` holds the
handlers; `asya-operator run` runs kopf on it, and the tests run it against a stand-in cluster.

- **create, resume, update** of an AsyncActor: its Secret and flavor are looked up; if one is
  missing the actor is `Degraded` (naming it), nothing is applied, and the handler is tried
  again every `recheck_s` until it is there. Otherwise its Deployment, TriggerAuthentication
  and ScaledObject and the namespace's end actors are applied, its queues and the end actors'
  declared, and its status written (with `observedGeneration`: all of that is done).
- **a change of an actor's Deployment** (its replicas becoming ready): the status again.
- **delete**, behind kopf's finalizer: the end actors lose this owner, then the actor's queues
  are deleted unless `keepQueues`. Deletion is never blocked for ever: with no Secret (or no
  `amqp-url` in it) the queues are left on the broker and a warning says so; with the broker
  unreachable it is tried `DELETE_ATTEMPTS` times, then the queues are left the same way.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Final

import kopf
import msgspec

from asya.errors import TransportError
from asya.health import HealthServer
from asya_operator import cluster, metrics
from asya_operator.admission import ActorAdmission, PooledActor, admit_actors
from asya_operator.cluster import ACTORS_PLURAL, COHORTS_PLURAL, POOLS_PLURAL, AdmissionWorld, World
from asya_operator.config import OperatorConfig, load_operator_config
from asya_operator.deployment import plan_end_actors
from asya_operator.metadata import ACTOR_COMPONENT, MANAGED_BY, actor_name
from asya_operator.plan import end_actor_owners, plan_actor
from asya_operator.pool_status import plan_pool_statuses
from asya_operator.queues import declare_actor_queues, delete_actor_queues
from asya_operator.resources import BROKER_AMQP_URL_KEY, GROUP, VERSION, AsyncActor
from asya_operator.scaling import admitted_replicas, desired_replicas
from asya_operator.status import (
    Problem,
    admission_changed,
    find_problems,
    pending_since,
    plan_admission_status,
    plan_status,
)

DELETE_ATTEMPTS: Final = 5
"""Tries at deleting a deleted actor's queues while the broker is unreachable, `recheck_s`
apart; then the AsyncActor is let go and its queues are left (logged)."""

registry = kopf.OperatorRegistry()
"""The operator's handlers; `kopf.operator(registry=registry)` runs them."""

_ACTORS: Final = (GROUP, VERSION, ACTORS_PLURAL)
_OUR_ACTOR_DEPLOYMENTS: Final = {
    "app.kubernetes.io/managed-by": MANAGED_BY,
    "app.kubernetes.io/component": ACTOR_COMPONENT,
}


@kopf.on.startup(registry=registry)
async def configure(*, memo: Any, **_: Any) -> None:
    """Read the operator's config from its environment and point the client at the cluster.

    Raises:
        SettingsError: an `ASYA_OPERATOR_*` variable is invalid (`asya-operator run` checks
            them before kopf starts, and exits 2).
    """
    config = load_operator_config(os.environ)
    memo["config"] = config
    # One admission pass at a time: each reads the whole pool state and writes what it decides.
    memo["admission"] = asyncio.Lock()
    await asyncio.to_thread(cluster.load_client_config)
    # Live while kopf's event loop answers; the metrics are the operator's own.
    health = HealthServer(config.port, live=_always, ready=_always, metrics=metrics.exposition)
    await health.start()
    memo["health"] = health


def _always() -> bool:
    return True


@kopf.on.cleanup(registry=registry)
async def stop_health(*, memo: Any, **_: Any) -> None:
    """Close the /healthz and /metrics port."""
    health: HealthServer | None = memo.get("health")
    if health is not None:
        await health.stop()


@asynccontextmanager
async def _counted() -> AsyncIterator[None]:
    # One reconciliation's outcome and duration; the handler's own errors pass through.
    started = time.monotonic()
    outcome = "error"
    try:
        yield
        outcome = "applied"
    except kopf.TemporaryError as exc:
        outcome = "degraded" if str(exc).startswith(_DEGRADED) else "broker_unreachable"
        raise
    finally:
        metrics.RECONCILES.labels(outcome=outcome).inc()
        metrics.RECONCILE_SECONDS.observe(time.monotonic() - started)


def _namespaced(namespace: str | None) -> str:
    if namespace is None:  # AsyncActors and Deployments are namespaced: never so
        raise kopf.PermanentError("an AsyncActor without a namespace")
    return namespace


def _decode(body: kopf.Body) -> AsyncActor:
    return msgspec.convert(dict(body), AsyncActor)


def _secret_keys(world: World) -> set[str] | None:
    return None if world.secret is None else set(world.secret)


def _read_world(actor: AsyncActor, namespace: str) -> World:
    with cluster.api_client() as api:
        return cluster.read_world(api, actor, namespace)


def _apply(bodies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    with cluster.api_client() as api:
        return cluster.apply_objects(api, bodies)


def _write_status(namespace: str, name: str, status: dict[str, Any]) -> None:
    with cluster.api_client() as api:
        cluster.write_status(api, namespace, name, status)


def _read_actor(namespace: str, name: str) -> AsyncActor | None:
    with cluster.api_client() as api:
        return cluster.read_actor(api, namespace, name)


def _end_actors(
    namespace: str, owners: list[AsyncActor], config: OperatorConfig, logger: kopf.Logger
) -> list[dict[str, Any]]:
    try:
        return plan_end_actors(namespace, owners, config)
    except ValueError as exc:
        # The actors' own objects are still applied; only the shared end actors wait.
        logger.error(f"end actors not applied: {exc}")
        return []


async def _report(
    actor: AsyncActor,
    namespace: str,
    deployment_status: dict[str, Any] | None,
    problems: Sequence[Problem],
    *,
    memo: Any = None,
) -> None:
    """Write the actor's status. With `memo`, an actor with a pool is read again and written
    between admission passes, so the admission conditions its status carries over are the last
    pass's (without: the caller is the pass, and `actor` is fresh)."""

    def build(current: AsyncActor) -> dict[str, Any]:
        return plan_status(current, deployment_status, problems, now=datetime.now(UTC))

    await _write_between_passes(actor, namespace, build, memo)


async def _write_between_passes(
    actor: AsyncActor,
    namespace: str,
    build: Callable[[AsyncActor], dict[str, Any]],
    memo: Any,
) -> None:
    name = actor_name(actor)
    if memo is None or actor.spec.pool is None:
        await asyncio.to_thread(_write_status, namespace, name, build(actor))
        return
    async with memo["admission"]:
        current = await asyncio.to_thread(_read_actor, namespace, name)
        if current is not None:
            await asyncio.to_thread(_write_status, namespace, name, build(current))


@kopf.on.resume(*_ACTORS, registry=registry)
@kopf.on.create(*_ACTORS, registry=registry)
@kopf.on.update(*_ACTORS, registry=registry)
async def reconcile(
    *, body: kopf.Body, namespace: str | None, memo: Any, logger: kopf.Logger, **_: Any
) -> None:
    """Apply an AsyncActor's objects and declare its queues, or report what it lacks.

    Raises:
        kopf.TemporaryError: its Secret or flavor is missing, or the broker is unreachable:
            kopf calls this again after `recheck_s`.
    """
    async with _counted():
        await _reconcile(_decode(body), _namespaced(namespace), memo, logger)


_DEGRADED: Final = "Degraded"


async def _reconcile(actor: AsyncActor, namespace: str, memo: Any, logger: kopf.Logger) -> None:
    config: OperatorConfig = memo["config"]
    if actor.spec.pool is not None:
        # The pass writes this actor's admitted replicas; plan from what it wrote.
        await _admit(memo, logger, skip=(namespace, actor_name(actor)))
        fresh = await asyncio.to_thread(_read_actor, namespace, actor_name(actor))
        actor = actor if fresh is None else fresh
    world = await asyncio.to_thread(_read_world, actor, namespace)
    problems = find_problems(actor, namespace, secret_keys=_secret_keys(world), flavor=world.flavor)
    if problems:
        await _report(actor, namespace, world.deployment_status, problems, memo=memo)
        messages = "; ".join(p.message for p in problems)
        raise kopf.TemporaryError(
            f"{_DEGRADED}, nothing applied: {messages}; checking again in {config.recheck_s} s",
            delay=config.recheck_s,
        )
    owners = end_actor_owners(world.actors, current=actor)
    bodies = plan_actor(actor, namespace, world.flavor, config)
    bodies += _end_actors(namespace, owners, config, logger)
    deployment, *_others = await asyncio.to_thread(_apply, bodies)
    assert world.secret is not None  # find_problems checked it and its keys
    try:
        await declare_actor_queues(world.secret[BROKER_AMQP_URL_KEY], namespace, actor_name(actor))
    except TransportError as exc:
        raise kopf.TemporaryError(
            f"queues not declared: {exc}; trying again in {config.recheck_s} s",
            delay=config.recheck_s,
        ) from exc
    # Written last: an observedGeneration means the objects are applied and the queues exist.
    await _report(actor, namespace, deployment.get("status"), [], memo=memo)


async def _admit(memo: Any, logger: kopf.Logger, *, skip: tuple[str, str] | None = None) -> None:
    """One admission pass over every actor with a pool: write each changed status, and apply
    each changed actor's objects (its Deployment at the admitted replicas), except `skip`'s,
    which the caller applies next. Passes run one at a time."""
    async with memo["admission"]:
        world = await asyncio.to_thread(_read_admission_world)
        pooled = _pooled(world)
        decided = admit_actors(world.pools, world.cohorts, world.namespace_labels, pooled)
        metrics.ADMISSION_PASSES.inc()
        await _write_pool_statuses(world, pooled, decided)
        now = datetime.now(UTC)
        waiting: dict[tuple[str, str], float] = {}
        # Shrinking actors first: a preemptor's pods never start before its victim's are
        # scaled away, so the Deployments together never run more than the quota.
        for namespace, actor in sorted(world.actors, key=lambda item: _growth(item, decided)):
            key = (namespace, actor_name(actor))
            admission = decided[key]
            status = plan_admission_status(actor, admission, now=now)
            since = pending_since(status)
            if since is not None:
                waiting[key] = since
            if not admission_changed(actor, status):
                continue
            if admission.preempted_by is not None:
                metrics.PREEMPTIONS.inc()
            logger.info(f"admission: {key[0]}/{key[1]}: {_admission_words(actor, admission)}")
            await asyncio.to_thread(_write_status, namespace, key[1], status)
            if key != skip:
                await _reapply(namespace, key[1], memo, logger)
        metrics.record_pending(waiting)


async def _write_pool_statuses(
    world: AdmissionWorld, pooled: list[PooledActor], decided: dict[tuple[str, str], ActorAdmission]
) -> None:
    planned = plan_pool_statuses(world.pools, pooled, decided)
    metrics.record_pools(planned)
    for pool in world.pools:
        name = str(pool.metadata["name"])
        before = msgspec.to_builtins(pool.status) if pool.status is not None else {}
        if {k: before.get(k) for k in planned[name]} != planned[name]:
            await asyncio.to_thread(_write_pool_status, name, planned[name])


def _write_pool_status(name: str, status: dict[str, Any]) -> None:
    with cluster.api_client() as api:
        cluster.write_pool_status(api, name, status)


def _growth(item: tuple[str, AsyncActor], decided: dict[tuple[str, str], ActorAdmission]) -> int:
    namespace, actor = item
    return decided[namespace, actor_name(actor)].admitted - admitted_replicas(actor)


def _pooled(world: AdmissionWorld) -> list[PooledActor]:
    # Age: creation time, then namespace and name (a stable order for equal timestamps).
    ordered = sorted(
        world.actors,
        key=lambda item: (
            item[1].metadata.get("creationTimestamp", ""),
            item[0],
            actor_name(item[1]),
        ),
    )
    return [
        PooledActor(
            namespace=namespace,
            name=actor_name(actor),
            pool=str(actor.spec.pool),
            priority=actor.spec.priority,
            age=age,
            flavor=actor.spec.flavor,
            resources=actor.spec.resources,
            desired=desired_replicas(actor),
            admitted=admitted_replicas(actor),
            admitted_flavor=actor.status.admitted_flavor if actor.status else None,
        )
        for age, (namespace, actor) in enumerate(ordered)
    ]


def _admission_words(actor: AsyncActor, admission: ActorAdmission) -> str:
    # The message, when there is one, starts with the counts ("3 of 5 replicas admitted, ...").
    text = admission.message or f"{admission.admitted} of {desired_replicas(actor)} admitted"
    if admission.preempted_by is not None:
        text += f" (preempted by {admission.preempted_by})"
    return text


async def _reapply(namespace: str, name: str, memo: Any, logger: kopf.Logger) -> None:
    # Another actor's admission changed: its Deployment follows, as its own reconcile would.
    actor = await asyncio.to_thread(_read_actor, namespace, name)
    if actor is None or actor.metadata.get("deletionTimestamp"):
        return
    config: OperatorConfig = memo["config"]
    world = await asyncio.to_thread(_read_world, actor, namespace)
    problems = find_problems(actor, namespace, secret_keys=_secret_keys(world), flavor=world.flavor)
    if problems:  # Degraded: its own reconcile reports it and applies once it is fixed
        return
    deployment, *_others = await asyncio.to_thread(
        _apply, plan_actor(actor, namespace, world.flavor, config)
    )
    status = _status_seen_since(actor, deployment.get("status"), [])
    await asyncio.to_thread(_write_status, namespace, name, status)


def _read_admission_world() -> AdmissionWorld:
    with cluster.api_client() as api:
        return cluster.read_admission_world(api)


@kopf.on.event(GROUP, VERSION, POOLS_PLURAL, registry=registry)
@kopf.on.event(GROUP, VERSION, COHORTS_PLURAL, registry=registry)
async def follow_quota(*, memo: Any, logger: kopf.Logger, **_: Any) -> None:
    """A pool or cohort appeared, changed or went: admission decides again for everyone."""
    await _admit(memo, logger)


@kopf.on.event("apps", "v1", "deployments", labels=_OUR_ACTOR_DEPLOYMENTS, registry=registry)
async def follow_deployment(
    *,
    event: kopf.RawEvent,
    namespace: str | None,
    name: str,
    status: kopf.Status,
    memo: Any,
    **_: Any,
) -> None:
    """Report an actor's replicas as its Deployment's status changes (pods becoming ready)."""
    namespace = _namespaced(namespace)
    if event["type"] == "DELETED":
        return
    actor = await asyncio.to_thread(_read_actor, namespace, name)
    if actor is None or actor.metadata.get("deletionTimestamp"):
        return
    world = await asyncio.to_thread(_read_world, actor, namespace)
    problems = find_problems(actor, namespace, secret_keys=_secret_keys(world), flavor=world.flavor)

    def build(current: AsyncActor) -> dict[str, Any]:
        return _status_seen_since(current, dict(status), problems)

    await _write_between_passes(actor, namespace, build, memo)


def _status_seen_since(
    actor: AsyncActor, deployment_status: dict[str, Any] | None, problems: Sequence[Problem]
) -> dict[str, Any]:
    # The generation observed stays the one `reconcile` applied (objects and queues), not one
    # it has yet to see: written by anyone else, the status keeps the one it has.
    report = plan_status(actor, deployment_status, problems, now=datetime.now(UTC))
    report.pop("observedGeneration", None)
    if actor.status is not None and actor.status.observed_generation is not None:
        report["observedGeneration"] = actor.status.observed_generation
    return report


@kopf.on.delete(*_ACTORS, registry=registry)
async def release(
    *,
    body: kopf.Body,
    namespace: str | None,
    name: str,
    retry: int,
    memo: Any,
    logger: kopf.Logger,
    **_: Any,
) -> None:
    """Drop the actor from the end actors' owners and delete its queues (unless `keepQueues`).

    Raises:
        kopf.TemporaryError: the broker is unreachable (at most `DELETE_ATTEMPTS` times).
    """
    config: OperatorConfig = memo["config"]
    namespace = _namespaced(namespace)
    actor = _decode(body)
    world = await asyncio.to_thread(_read_world, actor, namespace)
    owners = end_actor_owners(world.actors, leaving=name)
    if owners:
        # With no owner left, Kubernetes' garbage collector deletes the end actors itself.
        await asyncio.to_thread(_apply, _end_actors(namespace, owners, config, logger))
    if actor.spec.pool is not None:
        # Its quota is free now (a deleted actor is out of every pass): others may have it.
        await _admit(memo, logger)
    if actor.spec.keep_queues:
        logger.info("queues kept (keepQueues)")
        metrics.QUEUE_DELETIONS.labels(outcome="kept").inc()
        return
    url = (world.secret or {}).get(BROKER_AMQP_URL_KEY)
    if url is None:
        logger.warning(
            f"queues left on the broker: Secret {namespace}/{actor.spec.broker.secret_name}"
            f" or its key {BROKER_AMQP_URL_KEY} is gone, so the broker is unknown"
        )
        metrics.QUEUE_DELETIONS.labels(outcome="left").inc()
        return
    try:
        await delete_actor_queues(url, namespace, name)
    except TransportError as exc:
        if retry + 1 >= DELETE_ATTEMPTS:
            logger.error(f"queues left on the broker after {DELETE_ATTEMPTS} tries: {exc}")
            metrics.QUEUE_DELETIONS.labels(outcome="left").inc()
            return
        raise kopf.TemporaryError(
            f"queues not deleted: {exc}; trying again in {config.recheck_s} s",
            delay=config.recheck_s,
        ) from exc
    metrics.QUEUE_DELETIONS.labels(outcome="deleted").inc()
