"""One ActorGroup's objects and status, brought in line with what the admission pass decided for
its instances: the controller's I/O for it.

`stop_instances_but` scales away every instance that no longer runs, `delete_group_objects`
every instance of a group being deleted (its StatefulSets and Service deleted: the pods stop
gracefully, their sidecars give in-flight envelopes back to the queue); `sync` applies the
running instances' objects when what runs changed (or when asked: the group's spec changed)
and writes the status when it says something new. A group that lacks something (its Secret, a
flavor, a member name taken by an AsyncActor) is `Degraded` and gets no objects; its status
says what to fix. No decision is made here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

import kopf
import msgspec

from asya_operator import kube as cluster
from asya_operator.api.flavor import ResourceFlavor
from asya_operator.api.group import HOLDING, ActorGroup, InstanceStatus, held, known_instances
from asya_operator.config import OperatorConfig
from asya_operator.plans.conditions import Problem
from asya_operator.plans.group_objects import plan_group, service_name
from asya_operator.plans.group_status import find_group_problems, plan_group_status


async def stop_instances_but(
    group: ActorGroup, namespace: str, running: Collection[int], pods: Collection[Any]
) -> None:
    """Delete the StatefulSets and Service of every instance of `group` not in `running`.

    `pods` are the group's StatefulSets as the pass read them (`cluster.MemberPods`)."""
    name = group.metadata["name"]
    stopped = sorted({p.instance for p in pods if p.instance not in running})
    doomed = [("StatefulSet", p.name) for p in pods if p.instance not in running]
    doomed += [("Service", service_name(name, i)) for i in stopped]
    await delete_objects(namespace, doomed)


async def delete_group_objects(namespace: str, name: str) -> None:
    """Delete every StatefulSet and Service the operator made for the group `namespace/name`."""

    def listed() -> list[tuple[str, str, int]]:
        with cluster.api_client() as api:
            return cluster.read_group_objects(api, namespace, name)

    objects = await asyncio.to_thread(listed)
    await delete_objects(namespace, [(kind, obj) for kind, obj, _instance in objects])


async def delete_objects(namespace: str, objects: Collection[tuple[str, str]]) -> None:
    """Delete each (kind, name) of `namespace` (a StatefulSet or Service; gone: no error)."""

    def delete() -> None:
        with cluster.api_client() as api:
            for kind, name in objects:
                cluster.delete_object(api, kind, namespace, name)

    if objects:
        await asyncio.to_thread(delete)


def running_of(
    states: Mapping[int, InstanceStatus],
) -> dict[int, dict[str, tuple[str | None, int]]]:
    """What each running instance runs: member -> (flavor, replicas)."""
    return {i: held(s) for i, s in sorted(states.items()) if s.phase in HOLDING}


async def sync(
    group: ActorGroup,
    namespace: str,
    states: Mapping[int, InstanceStatus],
    ready: Mapping[int, bool],
    config: OperatorConfig,
    *,
    logger: kopf.Logger | logging.Logger,
    force: bool = False,
) -> list[Problem]:
    """Apply the running instances' objects if what runs changed (or `force`), and write the
    status if it changed; the group's problems (none: all applied)."""
    running = running_of(states)
    before = {i: h for i, h in ((i, held(s)) for i, s in known_instances(group).items()) if h}
    flavors_wanted = {f for members in running.values() for f, _count in members.values() if f}
    flavors, secret_keys, actor_names = await asyncio.to_thread(
        _read_needs, group, namespace, flavors_wanted
    )
    problems = find_group_problems(
        group,
        namespace,
        secret_keys=secret_keys,
        missing_flavors=flavors_wanted - set(flavors),
        actor_names=actor_names,
    )
    if not problems and (force or running != before):
        bodies = plan_group(group, namespace, running, flavors, config)
        await asyncio.to_thread(_apply, bodies)
    status = plan_group_status(group, states, ready, problems, now=datetime.now(UTC))
    if _changed(group, status):
        await asyncio.to_thread(_write_status, namespace, group.metadata["name"], status)
        if problems:
            logger.warning(
                f"ActorGroup {namespace}/{group.metadata['name']}: nothing applied:"
                f" {'; '.join(p.message for p in problems)}"
            )
    return problems


def _read_needs(
    group: ActorGroup, namespace: str, flavors: Collection[str]
) -> tuple[dict[str, ResourceFlavor], set[str] | None, set[str]]:
    with cluster.api_client() as api:
        secret = cluster.read_secret(api, namespace, group.spec.broker.secret_name)
        return (
            cluster.read_flavors(api, flavors),
            None if secret is None else set(secret),
            cluster.list_actor_names(api, namespace),
        )


def _apply(bodies: list[dict[str, Any]]) -> None:
    with cluster.api_client() as api:
        cluster.apply_objects(api, bodies)


def _write_status(namespace: str, name: str, status: dict[str, Any]) -> None:
    with cluster.api_client() as api:
        cluster.write_group_status(api, namespace, name, status)


def _changed(group: ActorGroup, status: Mapping[str, Any]) -> bool:
    """Whether `status` says anything the group's does not (transition times aside)."""
    before = msgspec.to_builtins(group.status) if group.status is not None else {}

    def essence(value: Mapping[str, Any]) -> dict[str, Any]:
        kept = {k: value.get(k) for k in status}
        kept["conditions"] = sorted(
            (c["type"], c["status"], c.get("reason"), c.get("message"))
            for c in value.get("conditions") or ()
        )
        return kept

    return essence(before) != essence(status)
