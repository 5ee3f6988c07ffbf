"""An AsyncActor's objects: its Deployment, TriggerAuthentication and ScaledObject, and its
namespace's end actors (happy-end and error-end: one sidecar each).

Pure: an AsyncActor, the ResourceFlavor it names (already looked up) and the operator's config
in, plain dicts out, ready to apply. The pod itself (containers, probes, security, placement)
is `pods`'s, shared with the ActorGroups' StatefulSets; the KEDA objects and replica counts are
`scaling`'s.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any, Final

import msgspec

from asya.routing import END_ACTORS
from asya.settings import env_var
from asya_operator.api.actor import AsyncActor
from asya_operator.api.flavor import ResourceFlavor
from asya_operator.api.metadata import (
    ACTOR_COMPONENT,
    END_ACTOR_COMPONENT,
    Owner,
    actor_name,
    object_meta,
    selector_labels,
)
from asya_operator.config import OperatorConfig
from asya_operator.plans.kueue import queue_deployment
from asya_operator.plans.pods import (
    actor_pod_template,
    env_entry,
    placement_flavor,
    pod_template,
    sidecar_container,
)
from asya_operator.plans.scaling import (
    plan_scaled_object,
    plan_trigger_authentication,
    running_replicas,
)

NO_SURGE: Final = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
"""A rollout that replaces one pod at a time and never runs one beyond `replicas`."""

KUBERNETES_ROLLOUT: Final = {
    "type": "RollingUpdate",
    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
}
"""Kubernetes' own default, written out so that what a Deployment does is in its spec."""


def rollout_strategy(actor: AsyncActor) -> dict[str, Any]:
    """How `actor`'s Deployment rolls to a new template.

    An actor that asks for GPUs, or runs under a pool's quota, rolls without surge: its pods
    are exactly those admitted (or, on a full GPU pool, all there is), so a surge pod would
    wait Pending for quota or a device nobody has and stall the rollout. One pod at a time is
    stopped (it drains: in-flight calls finish, the rest goes back to the queue) and then
    replaced; at 1 replica the actor is down from the old pod's stop until the new one is
    ready, its queue waiting, nothing lost. Other actors keep Kubernetes' default surge.
    """
    if actor.spec.resources.gpus or actor.spec.pool is not None:
        return copy.deepcopy(NO_SURGE)
    return copy.deepcopy(KUBERNETES_ROLLOUT)


def _deployment(
    meta: dict[str, Any],
    selector: dict[str, str],
    replicas: int,
    template: dict[str, Any],
    strategy: dict[str, Any],
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "strategy": strategy,
            "template": template,
        },
    }


def plan_deployment(
    actor: AsyncActor,
    namespace: str,
    flavor: ResourceFlavor | None,
    config: OperatorConfig,
) -> dict[str, Any]:
    """The Deployment of `actor` in `namespace`: runtime and sidecar, placed on `flavor`.

    `flavor` is the ResourceFlavor `spec.flavor` names (None when it names none); replicas are
    `running_replicas(actor)` (for an actor with a pool: those admitted; with Kueue admitting,
    the desired ones, in its pool's LocalQueue: `plans.kueue`).

    Raises:
        ValueError: `flavor` is not the one the actor names (look it up first; a missing
            flavor is a `Degraded` status, not a Deployment).
    """
    wanted = placement_flavor(actor)
    given = None if flavor is None else flavor.metadata.get("name")
    if wanted != given:
        raise ValueError(f"actor {actor_name(actor)} names flavor {wanted!r}, given {given!r}")
    name = actor_name(actor)
    meta = object_meta(name, namespace, ACTOR_COMPONENT, [actor], controller=True)
    overrides = _execution_overrides(actor)
    extra = [] if overrides is None else [env_entry(env_var("actor_overrides"), overrides)]
    template = actor_pod_template(
        actor.spec,
        meta["labels"],
        flavor,
        config,
        actor=name,
        namespace=namespace,
        secret_name=actor.spec.broker.secret_name,
        extra_env=extra,
    )
    selector = selector_labels(name, ACTOR_COMPONENT)
    kueue = config.admission == "kueue"
    replicas = running_replicas(actor, quota=not kueue)
    deployment = _deployment(meta, selector, replicas, template, rollout_strategy(actor))
    if kueue:
        queue_deployment(deployment, actor.spec.pool)
    return deployment


def plan_end_actors(
    namespace: str, actors: Sequence[Owner], config: OperatorConfig
) -> list[dict[str, Any]]:
    """The Deployments of `namespace`'s `happy-end` and `error-end`: one sidecar each.

    `actors` are the namespace's AsyncActors and ActorGroups. The end actors exist while there
    is at least one (none: an empty list) and each is one of their owners (not the controller):
    Kubernetes' garbage collector deletes an object only when its last owner is gone, so the
    end actors are created with a namespace's first actor and removed with its last, with no
    counting and no finalizer. They use the broker Secret the actors name.

    Raises:
        ValueError: the actors name different broker Secrets (one broker per namespace: an
            actor's final envelopes go to the end actors on its own broker).
    """
    if not actors:
        return []
    owners = sorted(actors, key=lambda o: (o.kind, o.metadata["name"]))
    secrets = sorted({a.spec.broker.secret_name for a in owners})
    if len(secrets) > 1:
        raise ValueError(
            f"the actors of namespace {namespace} name different broker Secrets"
            f" ({', '.join(secrets)}): the end actors need one broker per namespace"
        )
    (secret_name,) = secrets
    deployments = []
    for end in sorted(END_ACTORS, reverse=True):
        meta = object_meta(end, namespace, END_ACTOR_COMPONENT, owners, controller=False)
        pod_spec = {
            "containers": [
                sidecar_container(end, namespace, secret_name, config, with_socket=False)
            ]
        }
        selector = selector_labels(end, END_ACTOR_COMPONENT)
        deployments.append(
            _deployment(
                meta,
                selector,
                1,
                pod_template(meta["labels"], pod_spec, config),
                copy.deepcopy(KUBERNETES_ROLLOUT),
            )
        )
    return deployments


def plan_actor(
    actor: AsyncActor, namespace: str, flavor: ResourceFlavor | None, config: OperatorConfig
) -> list[dict[str, Any]]:
    """What the controller applies for one AsyncActor: its Deployment, TriggerAuthentication
    (before the ScaledObject that refers to it) and ScaledObject.

    Raises:
        ValueError: `flavor` is not the one the actor names.
    """
    return [
        plan_deployment(actor, namespace, flavor, config),
        plan_trigger_authentication(actor, namespace),
        plan_scaled_object(actor, namespace),
    ]


def end_actor_owners(
    listed: Iterable[Owner],
    *,
    current: Owner | None = None,
    leaving: tuple[str, str] | None = None,
) -> list[Owner]:
    """The AsyncActors and ActorGroups that own a namespace's end actors: those `listed`, with
    `current` in its newest version (a list may predate it), without the one `leaving` (kind,
    name: being deleted)."""
    owners = {(o.kind, o.metadata["name"]): o for o in listed}
    if current is not None:
        owners[current.kind, current.metadata["name"]] = current
    if leaving is not None:
        owners.pop(leaving, None)
    return [owners[key] for key in sorted(owners)]


def _execution_overrides(actor: AsyncActor) -> str | None:
    """The CR's execution fields the decorator's give way to, as the runtime reads them
    (`asya.overrides`); None when the CR sets none."""
    spec = actor.spec
    fields = {
        "timeoutSeconds": spec.timeout_seconds,
        "concurrency": spec.concurrency,
        "retry": spec.retry,
        "batch": spec.batch,
    }
    given = {name: _set(value) for name, value in fields.items() if value is not None}
    return msgspec.json.encode(given).decode() if given else None


def _set(value: object) -> Any:
    # A sub-object's unset fields are left out: unset means the decorator's (batch.waitMs).
    built = msgspec.to_builtins(value)
    return {k: v for k, v in built.items() if v is not None} if isinstance(built, dict) else built
