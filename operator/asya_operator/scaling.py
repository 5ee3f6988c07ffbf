"""KEDA objects: an AsyncActor's ScaledObject and TriggerAuthentication, and its replica count.

Pure. KEDA reads the actor's queue depth from the RabbitMQ management API (`protocol: http`),
whose count includes unacked messages: with `amqp` only ready messages count, and an actor
busy with everything it holds reads as idle and is scaled away mid-work. The ScaledObject
targets the AsyncActor's scale subresource (KEDA proposes `spec.replicas`); the operator then
sets the Deployment from it (`desired_replicas`). Credentials reach KEDA through a
TriggerAuthentication reading the broker Secret's `management-url` key, never through the CR.
"""

from __future__ import annotations

from typing import Any, Final

from asya.transport.base import queue_name
from asya_operator.metadata import ACTOR_COMPONENT, actor_name, object_meta
from asya_operator.resources import BROKER_MANAGEMENT_URL_KEY, AsyncActor

KEDA_API_VERSION: Final = "keda.sh/v1alpha1"


def desired_replicas(actor: AsyncActor) -> int:
    """The replicas the actor's Deployment gets: `spec.replicas` held to the scaling bounds.

    `spec.replicas` is what KEDA (or `kubectl scale`) wrote through the scale subresource;
    unset (a new actor KEDA has not seen yet) means `scaling.minReplicas`. A value outside
    [minReplicas, maxReplicas] (a manual scale) is held to the nearer bound.
    """
    scaling = actor.spec.scaling
    wanted = scaling.min_replicas if actor.spec.replicas is None else actor.spec.replicas
    return max(scaling.min_replicas, min(wanted, scaling.max_replicas))


def running_replicas(actor: AsyncActor) -> int:
    """The replicas the actor's Deployment runs: the desired ones, or, for an actor with a
    pool, those of them admitted by its quota (`status.admittedReplicas`, 0 until admitted).
    KEDA proposes, admission disposes: no pod is created only to wait for quota."""
    desired = desired_replicas(actor)
    if actor.spec.pool is None:
        return desired
    return min(desired, admitted_replicas(actor))


def admitted_replicas(actor: AsyncActor) -> int:
    """The replicas holding quota as the actor's status says (0 before any admission)."""
    return (actor.status.admitted_replicas or 0) if actor.status is not None else 0


def plan_trigger_authentication(actor: AsyncActor, namespace: str) -> dict[str, Any]:
    """The TriggerAuthentication giving KEDA the management URL (with credentials) as `host`."""
    name = actor_name(actor)
    return {
        "apiVersion": KEDA_API_VERSION,
        "kind": "TriggerAuthentication",
        "metadata": object_meta(name, namespace, ACTOR_COMPONENT, [actor], controller=True),
        "spec": {
            "secretTargetRef": [
                {
                    "parameter": "host",
                    "name": actor.spec.broker.secret_name,
                    "key": BROKER_MANAGEMENT_URL_KEY,
                }
            ]
        },
    }


def plan_scaled_object(actor: AsyncActor, namespace: str) -> dict[str, Any]:
    """The ScaledObject scaling `actor` on its queue's depth (ready plus unacked messages).

    The vhost is the management URL's path (`http://user:pass@host:15672/vhost`), so no
    `vhostName` is set. Trigger metadata values are strings: KEDA's CRD types them so.
    """
    name = actor_name(actor)
    scaling = actor.spec.scaling
    return {
        "apiVersion": KEDA_API_VERSION,
        "kind": "ScaledObject",
        "metadata": object_meta(name, namespace, ACTOR_COMPONENT, [actor], controller=True),
        "spec": {
            "scaleTargetRef": {"apiVersion": actor.api_version, "kind": actor.kind, "name": name},
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
                        "queueName": queue_name(namespace, name),
                    },
                    "authenticationRef": {"name": name},
                }
            ],
        },
    }
