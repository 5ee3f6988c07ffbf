"""The ActorGroups' handlers: gangs in the admission loop.

Thin, as `controller` is for AsyncActors: admission, readiness and what each instance runs are
decided in the admission pass (`admission_pass`, which also applies each group's StatefulSets
and Services and writes its status); these handlers add what is the group's own:
- **create, resume, update**: a pass that applies the group's objects from its new spec, the
  namespace's end actors (the group is one of their owners), and its members' queues declared
  (before the first envelope, as for any actor); `observedGeneration` is written last. While it
  lacks something (its Secret, a flavor, a member name an AsyncActor has) it is `Degraded`,
  nothing of it is applied, and it is looked at again every `recheck_s`.
- **its pods' readiness changing** (a StatefulSet's status): a pass, which steps the readiness
  of its instances (ready, or evicted at the deadline).
- **delete**, behind kopf's finalizer: a pass (its quota is free for others), its StatefulSets
  and Services deleted (Kubernetes' garbage collector would too: they are owned), the end
  actors lose this owner, and its members' queues are deleted unless `keepQueues`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import kopf

from asya import typeinfo
from asya.errors import TransportError
from asya_operator import kube as cluster
from asya_operator.api.group import ActorGroup, member_actor
from asya_operator.api.metadata import GROUP_COMPONENT, MANAGED_BY
from asya_operator.api.template import BROKER_AMQP_URL_KEY, GROUP, VERSION
from asya_operator.config import OperatorConfig
from asya_operator.kube import GROUPS_PLURAL
from asya_operator.operator import registry
from asya_operator.plans.actor_objects import end_actor_owners, plan_end_actors
from asya_operator.queues import declare_actor_queues, release_queues
from asya_operator.reconcile import actors as actor_sync
from asya_operator.reconcile import groups as group_sync
from asya_operator.reconcile.admission import run_pass

_GROUPS: Final = (GROUP, VERSION, GROUPS_PLURAL)
_OUR_GROUP_STATEFULSETS: Final = {
    "app.kubernetes.io/managed-by": MANAGED_BY,
    "app.kubernetes.io/component": GROUP_COMPONENT,
}


def _namespaced(namespace: str | None) -> str:
    if namespace is None:  # ActorGroups are namespaced: never so
        raise kopf.PermanentError("an ActorGroup without a namespace")
    return namespace


def _decode(body: kopf.Body) -> ActorGroup:
    return typeinfo.convert(dict(body), ActorGroup)


def _read_group(namespace: str, name: str) -> ActorGroup | None:
    with cluster.api_client() as api:
        return cluster.read_group(api, namespace, name)


def _degraded(group: ActorGroup | None) -> str | None:
    for condition in (group.status.conditions or ()) if group and group.status else ():
        if condition.type == "Degraded" and condition.status == "True":
            return condition.message or "Degraded"
    return None


@kopf.on.resume(*_GROUPS, registry=registry)
@kopf.on.create(*_GROUPS, registry=registry)
@kopf.on.update(*_GROUPS, registry=registry)
async def reconcile_group(
    *, body: kopf.Body, namespace: str | None, memo: Any, logger: kopf.Logger, **_: Any
) -> None:
    """Admit and apply an ActorGroup, declare its members' queues, or report what it lacks.

    Raises:
        kopf.TemporaryError: it lacks something, or the broker is unreachable: kopf calls this
            again after `recheck_s`.
    """
    config: OperatorConfig = memo["config"]
    namespace = _namespaced(namespace)
    group = _decode(body)
    name = group.metadata["name"]
    await run_pass(memo, logger, refresh=(namespace, name))
    fresh = await asyncio.to_thread(_read_group, namespace, name)
    degraded = _degraded(fresh)
    if fresh is None or degraded is not None:
        raise kopf.TemporaryError(
            f"Degraded, nothing applied: {degraded}; checking again in {config.recheck_s} s",
            delay=config.recheck_s,
        )
    world = await actor_sync.read_world(fresh, namespace)
    owners = end_actor_owners(world.owners, current=fresh)
    await actor_sync.apply(plan_end_actors(namespace, owners, config))
    assert world.secret is not None  # not Degraded: the Secret and its keys are there
    url = world.secret[BROKER_AMQP_URL_KEY]
    try:
        for member in group.spec.members:
            await declare_actor_queues(url, namespace, member_actor(name, member.name))
    except TransportError as exc:
        raise kopf.TemporaryError(
            f"queues not declared: {exc}; trying again in {config.recheck_s} s",
            delay=config.recheck_s,
        ) from exc
    generation = {"observedGeneration": group.metadata.get("generation")}
    await asyncio.to_thread(_write_status, namespace, name, generation)


def _write_status(namespace: str, name: str, status: dict[str, Any]) -> None:
    with cluster.api_client() as api:
        cluster.write_group_status(api, namespace, name, status)


@kopf.on.event("apps", "v1", "statefulsets", labels=_OUR_GROUP_STATEFULSETS, registry=registry)
async def follow_statefulset(
    *, event: kopf.RawEvent, memo: Any, logger: kopf.Logger, **_: Any
) -> None:
    """A gang's pods became ready or not: the pass steps its instances' readiness."""
    if event["type"] != "DELETED":
        await run_pass(memo, logger)


@kopf.on.delete(*_GROUPS, registry=registry)
async def release_group(
    *,
    body: kopf.Body,
    namespace: str | None,
    name: str,
    retry: int,
    memo: Any,
    logger: kopf.Logger,
    **_: Any,
) -> None:
    """Free the group's quota, stop its pods, and delete its members' queues (unless
    `keepQueues`).

    Raises:
        kopf.TemporaryError: the broker is unreachable (a few times, then the queues are left).
    """
    config: OperatorConfig = memo["config"]
    namespace = _namespaced(namespace)
    group = _decode(body)
    await run_pass(memo, logger)  # a group being deleted is in no pass: its quota is free
    await group_sync.delete_group_objects(namespace, name)
    world = await actor_sync.read_world(group, namespace)
    owners = end_actor_owners(world.owners, leaving=("ActorGroup", name))
    if owners:
        await actor_sync.apply(plan_end_actors(namespace, owners, config))
    await release_queues(
        (world.secret or {}).get(BROKER_AMQP_URL_KEY),
        namespace,
        [member_actor(name, m.name) for m in group.spec.members],
        keep=group.spec.keep_queues,
        attempt=retry,
        recheck_s=config.recheck_s,
        logger=logger,
    )
