"""The controller: kopf handlers that keep each AsyncActor's objects, queues and status in sync.

Thin on purpose: each handler reads the world (`actor_sync`, `cluster`), asks the pure functions
what to do (`plan`, `deployment`, `status`), and carries it out (`cluster` for the API, `queues`
for the broker). It makes no decision of its own beyond when to try again. `registry` holds the
handlers, the ActorGroups' (`group_controller`) too; `asya-operator run` runs kopf on it, and
the tests run it against a stand-in cluster. Admission (quota, priority, gangs) is the
`admission_pass`'s, run from here whenever a pooled actor, a pool or a cohort changes.

- **create, resume, update** of an AsyncActor: its Secret and flavor are looked up; if one is
  missing the actor is `Degraded` (naming it), nothing is applied, and the handler is tried
  again every `recheck_s` until it is there. Otherwise its Deployment, TriggerAuthentication
  and ScaledObject and the namespace's end actors are applied, its queues and the end actors'
  declared, and its status written (with `observedGeneration`: all of that is done). Only
  then can `Ready` be True: a client that waits for it finds the queue. While Degraded,
  `Ready` is False with the reason and `observedGeneration` stays the last generation done.
  A broker that cannot be reached leaves the actor `Degraded` (`BrokerUnreachable`, with the
  error) and is tried again every `recheck_s`; the other writers keep that reason until a
  declare succeeds. An actor that becomes Degraded, or Degraded for another reason, gets a
  Warning Event with the condition's reason and message (posted before the status is written).
- **a change of an actor's Deployment** (its replicas becoming ready): the status again, its
  `observedGeneration` as the reconcile left it. Every status write reads the actor again and
  is made one at a time, between admission passes.
- **a change of a broker Secret an actor names** (created, changed, deleted): the status of
  each actor that names it again, so one whose Secret goes (or loses `amqp-url`) is Degraded
  naming it, and recovers when it is back. kopf watches every Secret in scope (the chart's
  ClusterRole grants `list` and `watch` on Secrets for it); an in-memory index of the actors'
  `spec.broker.secretName` (`actors_by_secret`) filters out the others before any handler
  runs, so they cost no request.
- **delete**, behind kopf's finalizer: the end actors lose this owner, then the actor's queues
  are deleted unless `keepQueues`. Deletion is never blocked for ever: with no Secret (or no
  `amqp-url` in it) the queues are left on the broker and a warning says so; with the broker
  unreachable it is tried `queues.DELETE_ATTEMPTS` times, then the queues are left the same way.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Final

import kopf

from asya.errors import TransportError
from asya.health import HealthServer
from asya_operator import kube as cluster
from asya_operator import metrics
from asya_operator.api import decoding as cr_decoding
from asya_operator.api.actor import AsyncActor
from asya_operator.api.decoding import StoredSpecError
from asya_operator.api.metadata import ACTOR_COMPONENT, MANAGED_BY, Owner, actor_name
from asya_operator.api.template import BROKER_AMQP_URL_KEY, DEFAULT_BROKER_SECRET, GROUP, VERSION
from asya_operator.config import OperatorConfig, load_operator_config
from asya_operator.handlers import groups as _group_handlers  # noqa: F401  (registers them)
from asya_operator.kube import ACTORS_PLURAL, COHORTS_PLURAL, POOLS_PLURAL
from asya_operator.operator import registry
from asya_operator.plans.actor_objects import end_actor_owners, plan_actor, plan_end_actors
from asya_operator.plans.actor_status import (
    broker_unreachable,
    newly_degraded,
    plan_refused_status,
    plan_status,
)
from asya_operator.plans.conditions import Problem, Reason
from asya_operator.queues import declare_actor_queues, release_queues
from asya_operator.reconcile import actors as actor_sync
from asya_operator.reconcile.admission import ReadinessClock, post_event, run_pass

__all__ = ["registry"]

_log = logging.getLogger(__name__)

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

    async def on_time() -> None:
        await run_pass(memo, _log)

    clock = ReadinessClock(on_time, retry_s=config.recheck_s)
    clock.start()
    memo["clock"] = clock
    # Live while kopf's event loop answers; the metrics are the operator's own.
    health = HealthServer(config.port, live=_always, ready=_always, metrics=metrics.exposition)
    await health.start()
    memo["health"] = health


def _always() -> bool:
    return True


@kopf.on.cleanup(registry=registry)
async def stop_health(*, memo: Any, **_: Any) -> None:
    """Close the /healthz and /metrics port, stop the readiness clock."""
    health: HealthServer | None = memo.get("health")
    if health is not None:
        await health.stop()
    clock: ReadinessClock | None = memo.get("clock")
    if clock is not None:
        await clock.stop()


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
    return cr_decoding.decode(body, AsyncActor)


async def _refuse(body: kopf.Body, namespace: str, error: StoredSpecError) -> None:
    """Report a stored spec the operator cannot take: Degraded, and a Warning Event."""
    message = str(error)
    status = plan_refused_status(message, now=datetime.now(UTC))
    await actor_sync.write_status(namespace, body["metadata"]["name"], status)
    await actor_sync.post_event_on(body, reason=str(Reason.INVALID_SPEC), message=message)


def _end_actors(
    namespace: str, owners: list[Owner], config: OperatorConfig, logger: kopf.Logger
) -> list[dict[str, Any]]:
    try:
        return plan_end_actors(namespace, owners, config)
    except ValueError as exc:
        # The actors' own objects are still applied; only the shared end actors wait.
        logger.error(f"end actors not applied: {exc}")
        return []


async def _report_applied(
    actor: AsyncActor, namespace: str, deployment_status: dict[str, Any] | None, memo: Any
) -> None:
    """Write the status of an actor whose generation (as `actor` has it) is applied and whose
    queues are declared: that generation is observed now."""
    generation = actor.metadata.get("generation")

    def build(current: AsyncActor) -> dict[str, Any]:
        return plan_status(
            current, deployment_status, [], observed_generation=generation, now=datetime.now(UTC)
        )

    await _write_status(namespace, actor_name(actor), build, memo)


async def _report_seen(
    namespace: str,
    name: str,
    deployment_status: dict[str, Any] | None,
    problems: Sequence[Problem],
    memo: Any,
) -> None:
    """Write the actor's status as seen now, its observed generation left as it is."""

    def build(current: AsyncActor) -> dict[str, Any]:
        return actor_sync.status_seen_since(current, deployment_status, problems)

    await _write_status(namespace, name, build, memo)


async def _write_status(
    namespace: str, name: str, build: Callable[[AsyncActor], dict[str, Any]], memo: Any
) -> None:
    # The actor is read again and written between admission passes, and one writer at a time:
    # the admission conditions its status carries over are then the last pass's, and no
    # writer puts back a status (an observed generation, a Ready) read before another's.
    async with memo["admission"]:
        current = await actor_sync.read_actor(namespace, name)
        if current is None:
            return
        status = build(current)
        news = newly_degraded(current, status)
        if news is not None:  # first: whoever sees the status finds the Event posted
            await post_event(current, warning=True, reason=news["reason"], message=news["message"])
        await actor_sync.write_status(namespace, name, status)


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
    namespace = _namespaced(namespace)
    async with _counted():
        try:
            actor = _decode(body)
        except StoredSpecError as exc:
            await _refuse(body, namespace, exc)
            # Tried again when the spec changes (an update), not before: nothing else can fix it.
            raise kopf.PermanentError(f"{_DEGRADED}, nothing applied: {exc}") from exc
        await _reconcile(actor, namespace, memo, logger)


_DEGRADED: Final = "Degraded"


async def _reconcile(actor: AsyncActor, namespace: str, memo: Any, logger: kopf.Logger) -> None:
    config: OperatorConfig = memo["config"]
    if actor.spec.pool is not None:
        # The pass writes this actor's admitted replicas; plan from what it wrote.
        await run_pass(memo, logger, skip=(namespace, actor_name(actor)))
        fresh = await actor_sync.read_actor(namespace, actor_name(actor))
        actor = actor if fresh is None else fresh
    world = await actor_sync.read_world(actor, namespace)
    problems = actor_sync.problems_of(actor, namespace, world)
    if problems:
        # Nothing applied: the observed generation stays the last one that was.
        await _report_seen(namespace, actor_name(actor), world.deployment_status, problems, memo)
        messages = "; ".join(p.message for p in problems)
        raise kopf.TemporaryError(
            f"{_DEGRADED}, nothing applied: {messages}; checking again in {config.recheck_s} s",
            delay=config.recheck_s,
        )
    owners = end_actor_owners(world.owners, current=actor)
    bodies = plan_actor(actor, namespace, world.flavor, config)
    bodies += _end_actors(namespace, owners, config, logger)
    passes = memo["admission"]
    deployment, *_others = await actor_sync.apply_between_passes(actor, namespace, bodies, passes)
    assert world.secret is not None  # find_problems checked it and its keys
    try:
        await declare_actor_queues(world.secret[BROKER_AMQP_URL_KEY], namespace, actor_name(actor))
    except TransportError as exc:
        problem = broker_unreachable(exc)
        await _report_seen(namespace, actor_name(actor), deployment.get("status"), [problem], memo)
        raise kopf.TemporaryError(
            f"queues not declared: {exc}; trying again in {config.recheck_s} s",
            delay=config.recheck_s,
        ) from exc
    # Written last: an observedGeneration means the objects are applied and the queues exist.
    await _report_applied(actor, namespace, deployment.get("status"), memo)


@kopf.on.event(GROUP, VERSION, POOLS_PLURAL, registry=registry)
@kopf.on.event(GROUP, VERSION, COHORTS_PLURAL, registry=registry)
async def follow_quota(*, memo: Any, logger: kopf.Logger, **_: Any) -> None:
    """A pool or cohort appeared, changed or went: admission decides again for everyone."""
    await run_pass(memo, logger)


@kopf.on.event("apps", "v1", "deployments", labels=_OUR_ACTOR_DEPLOYMENTS, registry=registry)
async def follow_deployment(
    *,
    event: kopf.RawEvent,
    namespace: str | None,
    name: str,
    memo: Any,
    **_: Any,
) -> None:
    """Report an actor's replicas as its Deployment's status changes (pods becoming ready)."""
    namespace = _namespaced(namespace)
    if event["type"] == "DELETED":
        return
    await _follow(namespace, name, memo)


async def _follow(namespace: str, name: str, memo: Any) -> None:
    """Write the status of the actor `namespace/name` as the cluster shows it now (its
    Deployment's replicas, its Secret and flavor), unless it is gone or going."""
    actor = await actor_sync.read_actor(namespace, name)
    if actor is None or actor.metadata.get("deletionTimestamp"):
        return
    world = await actor_sync.read_world(actor, namespace)
    problems = actor_sync.problems_of(actor, namespace, world)
    await _report_seen(namespace, name, world.deployment_status, problems, memo)


SecretUsers = kopf.Index[tuple[str | None, str], str]
"""The `actors_by_secret` index kopf passes to the handlers."""


@kopf.index(*_ACTORS, registry=registry)
async def actors_by_secret(
    *, namespace: str | None, name: str, spec: kopf.Spec, **_: Any
) -> dict[tuple[str | None, str], str]:
    """Which actors use which broker Secret: (namespace, Secret name) -> the actors' names."""
    return {(namespace, _secret_name(spec)): name}


def _secret_name(spec: Mapping[str, Any]) -> str:
    """The broker Secret a stored spec names, read raw: for specs that may not decode."""
    broker = spec.get("broker") or {}
    return str(broker.get("secretName", DEFAULT_BROKER_SECRET))


def _users(namespace: str | None, name: str, indices: dict[str, Any]) -> list[str]:
    # kopf passes its indices as keyword arguments; its handler protocols do not name ours.
    users: SecretUsers = indices["actors_by_secret"]
    return sorted(users.get((namespace, name), ()))


def _is_used(*, namespace: str | None, name: str, **kwargs: Any) -> bool:
    # Called for every Secret event: an in-memory look-up, no request to the API server.
    return bool(_users(namespace, name, kwargs))


@kopf.on.event("v1", "secrets", when=_is_used, registry=registry)
async def follow_secret(*, namespace: str | None, name: str, memo: Any, **kwargs: Any) -> None:
    """A broker Secret appeared, changed or went: each actor that uses it reports it (Degraded
    naming it, or recovered). Other Secrets are filtered out before any handler runs."""
    for actor in _users(namespace, name, kwargs):
        await _follow(_namespaced(namespace), actor, memo)


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
        kopf.TemporaryError: the broker is unreachable (at most `queues.DELETE_ATTEMPTS` times).
    """
    config: OperatorConfig = memo["config"]
    namespace = _namespaced(namespace)
    try:
        actor = _decode(body)
    except StoredSpecError as exc:
        await _release_refused(body, namespace, retry, config, logger, exc)
        return
    world = await actor_sync.read_world(actor, namespace)
    owners = end_actor_owners(world.owners, leaving=("AsyncActor", name))
    if owners:
        # With no owner left, Kubernetes' garbage collector deletes the end actors itself.
        await actor_sync.apply(_end_actors(namespace, owners, config, logger))
    if actor.spec.pool is not None:
        # Its quota is free now (a deleted actor is out of every pass): others may have it.
        await run_pass(memo, logger)
    await release_queues(
        (world.secret or {}).get(BROKER_AMQP_URL_KEY),
        namespace,
        [name],
        keep=actor.spec.keep_queues,
        attempt=retry,
        recheck_s=config.recheck_s,
        logger=logger,
    )


async def _release_refused(
    body: kopf.Body,
    namespace: str,
    retry: int,
    config: OperatorConfig,
    logger: kopf.Logger,
    error: StoredSpecError,
) -> None:
    """Delete an actor whose spec never decoded, as far as its stored body tells: nothing was
    applied for it, so only its queues (which an earlier, valid spec may have declared) go."""
    logger.warning(f"deleted with a spec the operator refuses: {error}")
    spec = body.get("spec") or {}
    secret = await actor_sync.read_secret(namespace, _secret_name(spec))
    await release_queues(
        (secret or {}).get(BROKER_AMQP_URL_KEY),
        namespace,
        [body["metadata"]["name"]],
        keep=spec.get("keepQueues") is True,
        attempt=retry,
        recheck_s=config.recheck_s,
        logger=logger,
    )
