"""An actor's pod: its containers (runtime + sidecar), probes, volumes, security and placement,
the same for an AsyncActor's Deployment and an ActorGroup member's StatefulSet.

Pure: the actor's template, the ResourceFlavor it names (already looked up) and the operator's
config in, plain dicts out. What the pod gets and why:
- the **runtime** (the user's image, `python -m asya.runtime`): ASYA_HANDLER, the socket, the
  grace period, the user's env; never a broker credential. Its liveness and startup checks
  ping the runtime over its socket (`python -m asya.runtime.probe`): the socket appears only
  once the handler is loaded, so the startupProbe gives a model `startup_timeout_s` to load.
- the **sidecar** (the operator's image): the actor, the namespace, the socket, the health
  port and the broker URL from the Secret's `amqp-url` key; probed on /healthz and /readyz.
- both: the restricted Pod Security profile, the same non-root UID (the socket is 0660), a
  read-only root filesystem (the runtime gets a writable /tmp), and a termination grace longer
  than the drain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from asya.settings import env_var
from asya_operator.api.actor import AsyncActor
from asya_operator.api.flavor import ResourceFlavor, Taint
from asya_operator.api.template import BROKER_AMQP_URL_KEY, ActorResources, ActorTemplate
from asya_operator.config import OperatorConfig

RUNTIME_CONTAINER: Final = "runtime"
SIDECAR_CONTAINER: Final = "sidecar"
SOCKET_VOLUME: Final = "asya-socket"
TMP_VOLUME: Final = "tmp"
HEALTH_PORT_NAME: Final = "health"
GPU_RESOURCE: Final = "nvidia.com/gpu"

RUNTIME_COMMAND: Final = ("python", "-m", "asya.runtime")
PROBE_COMMAND: Final = ("python", "-m", "asya.runtime.probe")
SIDECAR_COMMAND: Final = ("asya-sidecar",)

_STARTUP_PERIOD_S: Final = 10


def container_security_context() -> dict[str, Any]:
    """The restricted Pod Security profile, for each container."""
    return {
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security_context(config: OperatorConfig) -> dict[str, Any]:
    """One non-root UID and GID for the pod, so the sidecar may open the runtime's socket."""
    uid = config.run_as_user
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def termination_grace_s(config: OperatorConfig) -> int:
    """terminationGracePeriodSeconds: the drain plus a margin, so SIGKILL never cuts a drain."""
    return config.grace_s + config.termination_margin_s


def env_entry(name: str, value: str) -> dict[str, Any]:
    """A container's `env` item with a literal value."""
    return {"name": name, "value": value}


def _socket_dir(config: OperatorConfig) -> str:
    return config.socket_path.rsplit("/", 1)[0] or "/"


def sidecar_container(
    actor: str, namespace: str, secret_name: str, config: OperatorConfig, *, with_socket: bool
) -> dict[str, Any]:
    """The sidecar container serving `actor` (with the runtime's socket unless an end actor)."""
    env = [
        env_entry(env_var("actor"), actor),
        env_entry(env_var("namespace"), namespace),
        env_entry(env_var("health_port"), str(config.health_port)),
        env_entry(env_var("grace_s"), str(config.grace_s)),
        {
            "name": env_var("broker_url"),
            "valueFrom": {"secretKeyRef": {"name": secret_name, "key": BROKER_AMQP_URL_KEY}},
        },
    ]
    container: dict[str, Any] = {
        "name": SIDECAR_CONTAINER,
        "image": config.sidecar_image,
        "command": list(SIDECAR_COMMAND),
        "env": env,
        "ports": [{"name": HEALTH_PORT_NAME, "containerPort": config.health_port}],
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": HEALTH_PORT_NAME},
            "periodSeconds": 10,
            "timeoutSeconds": 2,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": HEALTH_PORT_NAME},
            "periodSeconds": 5,
            "timeoutSeconds": 2,
            "failureThreshold": 2,
        },
        "resources": {
            "requests": {"cpu": config.sidecar_cpu, "memory": config.sidecar_memory},
            "limits": {"memory": config.sidecar_memory},
        },
        "securityContext": container_security_context(),
    }
    if with_socket:
        env.insert(2, env_entry(env_var("socket_path"), config.socket_path))
        container["volumeMounts"] = [{"name": SOCKET_VOLUME, "mountPath": _socket_dir(config)}]
    return container


def _runtime_resources(wanted: ActorResources) -> dict[str, Any]:
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if wanted.cpu is not None:
        requests["cpu"] = str(wanted.cpu)
    if wanted.memory is not None:
        # Memory cannot be throttled, only reclaimed by killing: the limit is the request.
        requests["memory"] = limits["memory"] = str(wanted.memory)
    if wanted.gpus:
        # An extended resource's request defaults to its limit, and may not differ from it.
        limits[GPU_RESOURCE] = str(wanted.gpus)
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return resources


def _runtime_probe() -> dict[str, Any]:
    # A ping over the socket: answered by the server's loop even while every worker is busy,
    # and only once the handler is loaded (the socket does not exist before).
    return {"exec": {"command": list(PROBE_COMMAND)}, "timeoutSeconds": 5}


def runtime_container(
    spec: ActorTemplate, config: OperatorConfig, extra_env: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The runtime container (the user's image) of a pod serving `spec`'s handler (an
    AsyncActor's spec or an ActorGroup member's template); `extra_env` are the operator's own
    variables beside the handler's, socket's and grace period's."""
    ours = [
        env_entry(env_var("handler"), spec.handler),
        env_entry(env_var("socket_path"), config.socket_path),
        env_entry(env_var("grace_s"), str(config.grace_s)),
        *extra_env,
    ]
    reserved = {var["name"] for var in ours}
    # The user's variables first; a name the operator sets is the operator's.
    users = [
        {k: v for k, v in msgspec.to_builtins(var).items() if v is not None}
        for var in spec.env or ()
        if var.name not in reserved
    ]
    container: dict[str, Any] = {
        "name": RUNTIME_CONTAINER,
        "image": spec.image,
        "command": list(RUNTIME_COMMAND),
        "env": users + ours,
        "resources": _runtime_resources(spec.resources),
        "volumeMounts": [
            {"name": SOCKET_VOLUME, "mountPath": _socket_dir(config)},
            {"name": TMP_VOLUME, "mountPath": "/tmp"},
        ],
        "startupProbe": {
            **_runtime_probe(),
            "periodSeconds": _STARTUP_PERIOD_S,
            "failureThreshold": math.ceil(config.startup_timeout_s / _STARTUP_PERIOD_S),
        },
        "livenessProbe": {**_runtime_probe(), "periodSeconds": 15, "failureThreshold": 3},
        "securityContext": container_security_context(),
    }
    if spec.env_from:
        container["envFrom"] = list(spec.env_from)
    return container


def _toleration_of(taint: Taint) -> dict[str, Any]:
    if taint.value is None:
        return {"key": taint.key, "operator": "Exists", "effect": taint.effect}
    return {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}


def placement_flavor(actor: AsyncActor) -> str | None:
    """The ResourceFlavor an actor's pods are placed by: the one it names, else (with a pool)
    the one its replicas were admitted in."""
    if actor.spec.flavor is not None or actor.spec.pool is None or actor.status is None:
        return actor.spec.flavor
    return actor.status.admitted_flavor


def placement(flavor: ResourceFlavor | None) -> dict[str, Any]:
    """`nodeSelector` and `tolerations` of a pod placed on `flavor` (nothing without one).

    The flavor's node labels become the node selector; each of its taints a toleration that
    matches it, then its extra tolerations.
    """
    if flavor is None:
        return {}
    spec = flavor.spec
    tolerations = [_toleration_of(t) for t in spec.node_taints or ()]
    tolerations += [
        {k: v for k, v in msgspec.to_builtins(t).items() if v is not None}
        for t in spec.tolerations or ()
    ]
    found: dict[str, Any] = {}
    if spec.node_labels:
        found["nodeSelector"] = dict(spec.node_labels)
    if tolerations:
        found["tolerations"] = tolerations
    return found


def pod_template(
    labels: dict[str, str], pod_spec: dict[str, Any], config: OperatorConfig
) -> dict[str, Any]:
    """The pod template of an actor's pods: `pod_spec` with the security context, grace period
    and metrics annotations every pod the operator makes has."""
    return {
        "metadata": {
            "labels": dict(labels),
            # The sidecar's /metrics, for Prometheus setups that scrape by annotation
            # (the operator chart's PodMonitor selects the pods by label instead).
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(config.health_port),
                "prometheus.io/path": "/metrics",
            },
        },
        "spec": {
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": pod_security_context(config),
            "terminationGracePeriodSeconds": termination_grace_s(config),
            **pod_spec,
        },
    }


def actor_volumes() -> list[dict[str, Any]]:
    """The pod's volumes: the runtime's socket directory, shared with the sidecar, and /tmp."""
    return [{"name": SOCKET_VOLUME, "emptyDir": {}}, {"name": TMP_VOLUME, "emptyDir": {}}]
