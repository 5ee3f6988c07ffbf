"""KEDA objects: an AsyncActor's ScaledObject and TriggerAuthentication, and its replica count.

Pure. KEDA reads the actor's queue depth from the RabbitMQ management API (`protocol: http`),
whose count includes unacked messages: with `amqp` only ready messages count, and an actor
busy with everything it holds reads as idle and is scaled away mid-work. The ScaledObject
targets the AsyncActor's scale subresource (KEDA proposes `spec.replicas`); the operator then
sets the Deployment from it (`desired_replicas`). An ActorGroup with `scaling` is scaled the
same way, its gang instances on its entry (first) member's queue. Credentials reach KEDA through a
TriggerAuthentication reading the broker Secret's `management-url` key, never through the CR.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from asya.queue_names import queue_name
from asya_operator.api.actor import AsyncActor
from asya_operator.api.group import ActorGroup, member_actor
from asya_operator.api.metadata import ACTOR_COMPONENT, GROUP_COMPONENT, actor_name, object_meta
from asya_operator.api.template import BROKER_MANAGEMENT_URL_KEY, ActorScaling

KEDA_API_VERSION: Final = "keda.sh/v1alpha1"
PAUSED_ANNOTATION: Final = "autoscaling.keda.sh/paused"
"""KEDA stops scaling a ScaledObject that carries it ("true"), at the replicas it has."""


def desired_replicas(actor: AsyncActor) -> int:
    """The replicas the actor's Deployment gets: `spec.replicas` held to the scaling bounds.

    `spec.replicas` is what KEDA (or `kubectl scale`) wrote through the scale subresource;
    unset (a new actor KEDA has not seen yet) means `scaling.minReplicas`. A value outside
    [minReplicas, maxReplicas] (a manual scale) is held to the nearer bound.
    """
    scaling = actor.spec.scaling
    wanted = scaling.min_replicas if actor.spec.replicas is None else actor.spec.replicas
    return max(scaling.min_replicas, min(wanted, scaling.max_replicas))


def running_replicas(actor: AsyncActor, *, quota: bool = True) -> int:
    """The replicas the actor's Deployment runs: the desired ones, or, for an actor with a
    pool under asya's own quota (`quota`), those of them admitted (`status.admittedReplicas`,
    0 until admitted). KEDA proposes, admission disposes: no pod is created only to wait for
    quota. With Kueue admitting (`quota` False) every desired pod exists, gated by Kueue."""
    desired = desired_replicas(actor)
    if actor.spec.pool is None or not quota:
        return desired
    return min(desired, admitted_replicas(actor))


def admitted_replicas(actor: AsyncActor) -> int:
    """The replicas holding quota as the actor's status says (0 before any admission)."""
    return (actor.status.admitted_replicas or 0) if actor.status is not None else 0


def plan_trigger_authentication(actor: AsyncActor, namespace: str) -> dict[str, Any]:
    """The TriggerAuthentication giving KEDA the management URL (with credentials) as `host`."""
    return _trigger_authentication(actor, actor_name(actor), namespace, ACTOR_COMPONENT)


def plan_scaled_object(actor: AsyncActor, namespace: str) -> dict[str, Any]:
    """The ScaledObject scaling `actor` on its queue's depth (ready plus unacked messages)."""
    name = actor_name(actor)
    return _scaled_object(actor, name, namespace, actor.spec.scaling, name, ACTOR_COMPONENT)


def group_keda_name(group: str) -> str:
    """The name of an ActorGroup's ScaledObject and TriggerAuthentication: `{group}.actorgroup`,
    which no AsyncActor's can be (an actor name has no dot)."""
    return f"{group}.actorgroup"


def plan_group_keda(group: ActorGroup, namespace: str) -> list[dict[str, Any]]:
    """The TriggerAuthentication and ScaledObject scaling an ActorGroup's instances on its entry
    member's queue; none when the group does not ask for scaling."""
    scaling = group.spec.scaling
    if scaling is None:
        return []
    name = group.metadata["name"]
    entry = member_actor(name, group.spec.members[0].name)
    keda = group_keda_name(name)
    return [
        _trigger_authentication(group, keda, namespace, GROUP_COMPONENT),
        _scaled_object(group, keda, namespace, scaling, entry, GROUP_COMPONENT),
    ]


def _trigger_authentication(
    owner: AsyncActor | ActorGroup, name: str, namespace: str, component: str
) -> dict[str, Any]:
    return {
        "apiVersion": KEDA_API_VERSION,
        "kind": "TriggerAuthentication",
        "metadata": object_meta(name, namespace, component, [owner], controller=True),
        "spec": {
            "secretTargetRef": [
                {
                    "parameter": "host",
                    "name": owner.spec.broker.secret_name,
                    "key": BROKER_MANAGEMENT_URL_KEY,
                }
            ]
        },
    }


def _scaled_object(
    owner: AsyncActor | ActorGroup,
    name: str,
    namespace: str,
    scaling: ActorScaling,
    queue_actor: str,
    component: str,
) -> dict[str, Any]:
    """A ScaledObject scaling `owner` (through its scale subresource) on `queue_actor`'s queue.

    The vhost is the management URL's path (`http://user:pass@host:15672/vhost`), so no
    `vhostName` is set. Trigger metadata values are strings: KEDA's CRD types them so.
    """
    meta = object_meta(name, namespace, component, [owner], controller=True)
    if scaling.paused:
        meta.setdefault("annotations", {})[PAUSED_ANNOTATION] = "true"
    spec: dict[str, Any] = {
        "scaleTargetRef": {
            "apiVersion": owner.api_version,
            "kind": owner.kind,
            "name": owner.metadata["name"],
        },
        "pollingInterval": scaling.polling_interval,
        "cooldownPeriod": scaling.cooldown_period,
        "minReplicaCount": scaling.min_replicas,
        "maxReplicaCount": scaling.max_replicas,
        "triggers": [
            {
                "type": "rabbitmq",
                "metadata": {
                    "protocol": "http",
                    "mode": "QueueLength",
                    "value": str(scaling.queue_length),
                    "activationValue": str(scaling.activation_queue_length),
                    "queueName": queue_name(namespace, queue_actor),
                },
                "authenticationRef": {"name": name},
            }
        ],
    }
    if scaling.fallback is not None:
        spec["fallback"] = msgspec.to_builtins(scaling.fallback)
    if scaling.behavior is not None:
        behavior = msgspec.to_builtins(scaling.behavior)
        spec["advanced"] = {"horizontalPodAutoscalerConfig": {"behavior": behavior}}
    return {"apiVersion": KEDA_API_VERSION, "kind": "ScaledObject", "metadata": meta, "spec": spec}
