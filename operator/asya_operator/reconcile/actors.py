"""One AsyncActor's objects and status, brought in line with its CR: the controller's I/O for it.

Each function reads the world through `cluster` (off the event loop: the official client is
synchronous), asks the pure planners (`plan`, `status`) what to write, and writes it. No
decision is made here. Used by the AsyncActor handlers (`controller`) and by the admission pass
(`admission_pass`), which re-applies an actor whose admitted replicas it changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from asya_operator import kube as cluster
from asya_operator.api.actor import AsyncActor
from asya_operator.api.metadata import Owner, actor_name
from asya_operator.config import OperatorConfig
from asya_operator.kube import World
from asya_operator.plans.actor_objects import plan_actor
from asya_operator.plans.actor_status import (
    find_problems,
    kept_problems,
    observed_generation,
    plan_status,
)
from asya_operator.plans.conditions import Problem
from asya_operator.plans.scaling import running_replicas


def _read_world(actor: Owner, namespace: str) -> World:
    with cluster.api_client() as api:
        return cluster.read_world(api, actor, namespace)


async def read_world(actor: Owner, namespace: str) -> World:
    """What the cluster holds for `actor` (an AsyncActor or ActorGroup): its Secret, flavor,
    Deployment, the namespace's actors and groups."""
    return await asyncio.to_thread(_read_world, actor, namespace)


def _apply(bodies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    with cluster.api_client() as api:
        return cluster.apply_objects(api, bodies)


async def apply(bodies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Apply `bodies` in order; the stored objects."""
    return await asyncio.to_thread(_apply, bodies)


async def apply_between_passes(
    actor: AsyncActor, namespace: str, bodies: Sequence[dict[str, Any]], passes: asyncio.Lock
) -> list[dict[str, Any]]:
    """Apply an actor's planned objects (its Deployment first). With a pool, between admission
    passes (`passes`) and with the replicas its status admits now: a pass may have shrunk it
    since `bodies` were planned, and the quota it gave up may already run elsewhere."""
    if actor.spec.pool is None:
        return await apply(bodies)
    async with passes:
        current = await read_actor(namespace, actor_name(actor))
        if current is None:
            return await apply(bodies)
        deployment, *others = bodies
        # Being deleted, it is in no pass: the quota its status still shows is another's.
        leaving = current.metadata.get("deletionTimestamp") is not None
        replicas = 0 if leaving else running_replicas(current)
        return await apply(
            [{**deployment, "spec": {**deployment["spec"], "replicas": replicas}}, *others]
        )


def _scale_down(namespace: str, name: str, replicas: int) -> None:
    with cluster.api_client() as api:
        cluster.scale_down_deployment(api, namespace, name, replicas)


async def scale_down(namespace: str, name: str, replicas: int) -> None:
    """Scale the actor's Deployment down to `replicas` if it runs more; returns once the API
    server has stored it. Only the replicas change: the rest is its reconcile's to apply."""
    await asyncio.to_thread(_scale_down, namespace, name, replicas)


def _write_status(namespace: str, name: str, status: dict[str, Any]) -> None:
    with cluster.api_client() as api:
        cluster.write_status(api, namespace, name, status)


async def write_status(namespace: str, name: str, status: dict[str, Any]) -> None:
    """Merge `status` into the AsyncActor's status."""
    await asyncio.to_thread(_write_status, namespace, name, status)


def _read_actor(namespace: str, name: str) -> AsyncActor | None:
    with cluster.api_client() as api:
        return cluster.read_actor(api, namespace, name)


async def read_actor(namespace: str, name: str) -> AsyncActor | None:
    """The AsyncActor as stored now (None: gone)."""
    return await asyncio.to_thread(_read_actor, namespace, name)


def _read_secret(namespace: str, name: str) -> dict[str, str] | None:
    with cluster.api_client() as api:
        return cluster.read_secret(api, namespace, name)


async def read_secret(namespace: str, name: str) -> dict[str, str] | None:
    """The Secret's data, decoded (None: no such Secret)."""
    return await asyncio.to_thread(_read_secret, namespace, name)


def _post_event_on(body: Mapping[str, Any], reason: str, message: str) -> None:
    with cluster.api_client() as api:
        cluster.post_event_on(api, body, warning=True, reason=reason, message=message)


async def post_event_on(body: Mapping[str, Any], *, reason: str, message: str) -> None:
    """A Warning Event about the stored object `body`."""
    await asyncio.to_thread(_post_event_on, body, reason, message)


def problems_of(actor: AsyncActor, namespace: str, world: World) -> list[Problem]:
    """What `actor` needs and the cluster lacks."""
    keys = None if world.secret is None else set(world.secret)
    return find_problems(actor, namespace, secret_keys=keys, flavor=world.flavor)


def status_seen_since(
    actor: AsyncActor, deployment_status: dict[str, Any] | None, problems: Sequence[Problem]
) -> dict[str, Any]:
    """The actor's status as anyone but its reconcile writes it: the generation observed stays
    the one the reconcile applied (objects and queues), not one it has yet to see, so `Ready`
    waits for the reconcile; so does a broker it found unreachable (`kept_problems`)."""
    return plan_status(
        actor,
        deployment_status,
        [*problems, *kept_problems(actor)],
        observed_generation=observed_generation(actor),
        now=datetime.now(UTC),
    )


async def reapply(namespace: str, name: str, config: OperatorConfig) -> None:
    """Apply an actor's objects as its own reconcile would (its admission changed): its
    Deployment follows. A Degraded actor is left to its own reconcile."""
    actor = await read_actor(namespace, name)
    if actor is None or actor.metadata.get("deletionTimestamp"):
        return
    world = await read_world(actor, namespace)
    if problems_of(actor, namespace, world):
        return
    deployment, *_others = await apply(plan_actor(actor, namespace, world.flavor, config))
    await write_status(namespace, name, status_seen_since(actor, deployment.get("status"), []))
