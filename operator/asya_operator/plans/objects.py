"""Everything the operator would create for a set of CRs read from files: `asya-operator
plan`'s objects, actor by actor, group by group, then each namespace's end actors.

Pure: the CRs (`files.read_crs`) and the operator's config in, the planned objects out. An
ActorGroup's objects are planned for each instance it asks for (`desired_instances`) at full
size (on a cluster, admission decides how many run).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from asya_operator.api.group import ActorGroup, desired_instances
from asya_operator.api.metadata import Owner, actor_name
from asya_operator.config import OperatorConfig
from asya_operator.plans.actor_objects import plan_deployment, plan_end_actors
from asya_operator.plans.files import CrError, Crs
from asya_operator.plans.group_objects import plan_group
from asya_operator.plans.pools import with_effective_pool
from asya_operator.plans.scaling import plan_scaled_object, plan_trigger_authentication


@dataclasses.dataclass(frozen=True)
class PlannedObject:
    """An object the operator would create, and what it is created for."""

    origin: str
    body: dict[str, Any]


def plan_objects(crs: Crs, config: OperatorConfig) -> list[PlannedObject]:
    """Every object the operator would create for `crs`, actor by actor, then end actors.

    Raises:
        CrError: the actors of one namespace name different broker Secrets.
    """
    planned = []
    by_namespace: dict[str, list[Owner]] = {}
    for namespace, owned in crs.actors:
        # Its namespace's default pool is its pool: its Deployment runs what is admitted.
        actor = with_effective_pool(owned, crs.namespace_labels.get(namespace, {}))
        origin = f"AsyncActor {namespace}/{actor_name(actor)}"
        flavor = None if actor.spec.flavor is None else crs.flavors[actor.spec.flavor]
        for body in (
            plan_deployment(actor, namespace, flavor, config),
            plan_trigger_authentication(actor, namespace),
            plan_scaled_object(actor, namespace),
        ):
            planned.append(PlannedObject(origin, body))
        by_namespace.setdefault(namespace, []).append(actor)
    for namespace, group in crs.groups:
        origin = f"ActorGroup {namespace}/{group.metadata['name']}"
        for body in plan_group(group, namespace, _full_size(group), crs.flavors, config):
            planned.append(PlannedObject(origin, body))
        by_namespace.setdefault(namespace, []).append(group)
    for namespace, actors in sorted(by_namespace.items()):
        try:
            ends = plan_end_actors(namespace, actors, config)
        except ValueError as exc:
            raise CrError(str(exc)) from exc
        planned += [PlannedObject(f"the end actors of namespace {namespace}", e) for e in ends]
    return planned


def _full_size(group: ActorGroup) -> dict[int, dict[str, tuple[str | None, int]]]:
    """Every instance of `group` at every member's full size, in its template's flavor (with a
    pool, admission may choose a flavor where the template names none, or admit fewer)."""
    members = {m.name: (m.template.flavor, m.replicas) for m in group.spec.members}
    return {instance: dict(members) for instance in range(desired_instances(group))}
