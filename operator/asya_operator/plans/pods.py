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
  read-only root filesystem (the runtime gets a writable /tmp), and a drain (ASYA_GRACE_S) long
  enough for a call of the actor's timeout to finish, inside a termination grace longer still.
- the template's escape hatches (pull secrets, service account, runtime class, priority class,
  volumes and the runtime's mounts, affinity, tolerations, node selector, pod labels and
  annotations), under one rule: where a value of the template meets one of the operator's (a
  volume name, a mount path, a label or annotation key) or the flavor's (a node selector key),
  the operator's or the flavor's wins. The CRDs' CEL rules refuse the collisions they can see;
  this rule holds for a CR that reaches the plan without them (`asya-operator plan`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from asya.actor import ActorOptions
from asya.admission.quantity import parse_quantity
from asya.envelope import ENVELOPE_OVERHEAD_BYTES, Limits
from asya.settings import ProcessSettings, env_var
from asya_operator.api.actor import AsyncActor, AsyncActorSpec
from asya_operator.api.flavor import ResourceFlavor, Taint
from asya_operator.api.group import MemberTemplate
from asya_operator.api.template import (
    BROKER_AMQP_URL_KEY,
    SOCKET_VOLUME,
    TMP_VOLUME,
    ActorResources,
    ActorTemplate,
    ResourceList,
    SidecarResources,
)
from asya_operator.config import OperatorConfig

RUNTIME_CONTAINER: Final = "runtime"
SIDECAR_CONTAINER: Final = "sidecar"
HEALTH_PORT_NAME: Final = "health"
GPU_RESOURCE: Final = "nvidia.com/gpu"

RUNTIME_COMMAND: Final = ("python", "-m", "asya.runtime")
PROBE_COMMAND: Final = ("python", "-m", "asya.runtime.probe")
SIDECAR_COMMAND: Final = ("asya-sidecar",)

_STARTUP_PERIOD_S: Final = 10
_ACTOR_DEFAULTS: Final = ActorOptions()
_MIB: Final = 2**20

ENVELOPE_COPIES: Final = 2
"""Copies of each envelope in flight the sidecar's memory is sized for: the message as the
broker delivered it, and the frame it becomes on its way to the runtime (or the result on its
way back)."""


@dataclass(frozen=True)
class Execution:
    """What a pod is sized and drained for: the calls its actor makes, as far as the operator
    knows them (an AsyncActor's overrides, else `@actor`'s defaults: it never sees the
    decorator)."""

    timeout_s: float
    concurrency: int
    batch: int


def execution(spec: ActorTemplate) -> Execution:
    """An AsyncActor's `timeoutSeconds`, `concurrency` and `batch.size` where it sets them, else
    `@actor`'s defaults (a group member's template has `timeoutSeconds` only)."""
    timeout_s, concurrency, batch = (
        _ACTOR_DEFAULTS.timeout_s,
        _ACTOR_DEFAULTS.concurrency,
        _ACTOR_DEFAULTS.batch or 1,
    )
    if isinstance(spec, AsyncActorSpec | MemberTemplate):
        timeout_s = spec.timeout_seconds or timeout_s
    if isinstance(spec, AsyncActorSpec):
        concurrency = spec.concurrency or concurrency
        batch = spec.batch.size if spec.batch is not None else batch
    return Execution(timeout_s=timeout_s, concurrency=concurrency, batch=batch)


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


def drain_s(config: OperatorConfig, timeout_s: float) -> int:
    """ASYA_GRACE_S of runtime and sidecar: the operator's drain, or the actor's timeout when
    longer, so a call under way at SIGTERM (a rollout, a scale-down) may finish rather than be
    given back and run again."""
    return max(config.grace_s, math.ceil(timeout_s))


def termination_grace_s(config: OperatorConfig, grace_s: int) -> int:
    """terminationGracePeriodSeconds of a pod draining for `grace_s`: the drain plus a margin,
    so SIGKILL never cuts a drain."""
    return grace_s + config.termination_margin_s


def sidecar_memory(config: OperatorConfig, run: Execution) -> str:
    """The sidecar's memory: the operator's `sidecar_memory` (the process itself) plus room for
    every envelope it may hold, each at the largest payload.

    It holds its prefetch, concurrency x (2 + pipeline depth) x batch envelopes (as
    `ProcessSettings.pipeline_depth` documents), each up to the payload limit plus the envelope's
    overhead, `ENVELOPE_COPIES` times. Rounded up to a whole MiB.
    """
    prefetch = run.concurrency * (2 + ProcessSettings().pipeline_depth) * run.batch
    envelope_bytes = Limits().max_payload_bytes + ENVELOPE_OVERHEAD_BYTES
    base_bytes = math.ceil(parse_quantity(config.sidecar_memory) / 1000)
    total = base_bytes + ENVELOPE_COPIES * prefetch * envelope_bytes
    return f"{math.ceil(total / _MIB)}Mi"


def _quantities(given: ResourceList | None) -> dict[str, str]:
    if given is None:
        return {}
    return {k: str(v) for k, v in msgspec.to_builtins(given).items() if v is not None}


def sidecar_resources(
    config: OperatorConfig, run: Execution, given: SidecarResources | None = None
) -> dict[str, Any]:
    """The sidecar's requests and limits: CPU the operator's `sidecar_cpu`, memory
    `sidecar_memory(config, run)` as request and limit; each value `given` replaces the derived
    one, and a memory request given without a memory limit is the limit too."""
    memory = sidecar_memory(config, run)
    requests = {"cpu": config.sidecar_cpu, "memory": memory}
    limits = {"memory": memory}
    if given is not None:
        requests |= _quantities(given.requests)
        limits |= _quantities(given.limits)
        if "memory" in _quantities(given.requests) and "memory" not in _quantities(given.limits):
            # Memory cannot be throttled, only reclaimed by killing: the limit is the request.
            limits["memory"] = requests["memory"]
    return {"requests": requests, "limits": limits}


def env_entry(name: str, value: str) -> dict[str, Any]:
    """A container's `env` item with a literal value."""
    return {"name": name, "value": value}


def _socket_dir(config: OperatorConfig) -> str:
    return config.socket_path.rsplit("/", 1)[0] or "/"


def sidecar_container(
    actor: str,
    namespace: str,
    secret_name: str,
    config: OperatorConfig,
    *,
    with_socket: bool,
    grace_s: int | None = None,
    resources: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The sidecar container serving `actor` (with the runtime's socket unless an end actor),
    draining for `grace_s` (default: the operator's) and asking for `resources` (default: the
    operator's sidecar CPU and memory)."""
    env = [
        env_entry(env_var("actor"), actor),
        env_entry(env_var("namespace"), namespace),
        env_entry(env_var("health_port"), str(config.health_port)),
        env_entry(env_var("grace_s"), str(config.grace_s if grace_s is None else grace_s)),
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
        "resources": resources
        or {
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


def _runtime_mounts(spec: ActorTemplate, config: OperatorConfig) -> list[dict[str, Any]]:
    ours = [
        {"name": SOCKET_VOLUME, "mountPath": _socket_dir(config)},
        {"name": TMP_VOLUME, "mountPath": "/tmp"},
    ]
    taken = {m["mountPath"] for m in ours} | {m["name"] for m in ours}
    users = [
        {k: v for k, v in msgspec.to_builtins(mount).items() if v is not None}
        for mount in spec.volume_mounts or ()
        if mount.mount_path not in taken and mount.name not in taken
    ]
    return ours + users


def runtime_container(
    spec: ActorTemplate,
    config: OperatorConfig,
    extra_env: Sequence[dict[str, Any]] = (),
    *,
    grace_s: int | None = None,
) -> dict[str, Any]:
    """The runtime container (the user's image) of a pod serving `spec`'s handler (an
    AsyncActor's spec or an ActorGroup member's template), with the template's volume mounts;
    `extra_env` are the operator's own variables beside the handler's, socket's and drain's
    (`grace_s`, default: the operator's)."""
    ours = [
        env_entry(env_var("handler"), spec.handler),
        env_entry(env_var("socket_path"), config.socket_path),
        env_entry(env_var("grace_s"), str(config.grace_s if grace_s is None else grace_s)),
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
        "volumeMounts": _runtime_mounts(spec, config),
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


def placement(
    flavor: ResourceFlavor | None, template: ActorTemplate | None = None
) -> dict[str, Any]:
    """`nodeSelector`, `tolerations` and `affinity` of a pod of `template` placed on `flavor`.

    The flavor's node labels become the node selector, over the template's own (on a key both
    set, the flavor's value wins: the replicas hold quota in the flavor, so they must land on
    its nodes); each of the flavor's taints a toleration that matches it, then its extra
    tolerations, then the template's; the template's affinity as it is.
    """
    selector: dict[str, str] = {}
    tolerations: list[dict[str, Any]] = []
    found: dict[str, Any] = {}
    if template is not None:
        selector |= template.node_selector or {}
        affinity = msgspec.to_builtins(template.affinity) if template.affinity else None
        if affinity:  # `affinity: {}` says nothing: left out, as before it was typed
            found["affinity"] = affinity
    if flavor is not None:
        spec = flavor.spec
        selector |= spec.node_labels or {}
        tolerations += [_toleration_of(t) for t in spec.node_taints or ()]
        tolerations += [_plain(t) for t in spec.tolerations or ()]
    if template is not None:
        tolerations += [
            _plain(t) for t in template.tolerations or () if _plain(t) not in tolerations
        ]
    if selector:
        found["nodeSelector"] = selector
    if tolerations:
        found["tolerations"] = tolerations
    return found


def _plain(value: msgspec.Struct) -> dict[str, Any]:
    return {k: v for k, v in msgspec.to_builtins(value).items() if v is not None}


def pod_template(
    labels: Mapping[str, str],
    pod_spec: dict[str, Any],
    config: OperatorConfig,
    *,
    grace_s: int | None = None,
    extra_labels: Mapping[str, str] | None = None,
    extra_annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The pod template of an actor's pods: `pod_spec` with the security context, termination
    grace (the drain `grace_s`, default: the operator's, plus the margin) and metrics
    annotations every pod the operator makes has; `extra_labels` and `extra_annotations` under
    the operator's (on a key both set, the operator's wins: its selectors are built on its
    labels)."""
    annotations = {
        # The sidecar's /metrics, for Prometheus setups that scrape by annotation
        # (the operator chart's PodMonitor selects the pods by label instead).
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(config.health_port),
        "prometheus.io/path": "/metrics",
    }
    return {
        "metadata": {
            "labels": {**(extra_labels or {}), **labels},
            "annotations": {**(extra_annotations or {}), **annotations},
        },
        "spec": {
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": pod_security_context(config),
            "terminationGracePeriodSeconds": termination_grace_s(
                config, config.grace_s if grace_s is None else grace_s
            ),
            **pod_spec,
        },
    }


def actor_volumes(template: ActorTemplate | None = None) -> list[dict[str, Any]]:
    """The pod's volumes: the runtime's socket directory, shared with the sidecar, and /tmp;
    then the template's own (one named as the operator's is left out: the operator's wins)."""
    ours = [{"name": SOCKET_VOLUME, "emptyDir": {}}, {"name": TMP_VOLUME, "emptyDir": {}}]
    taken = {volume["name"] for volume in ours}
    users = [
        _plain(volume)
        for volume in (template.volumes if template is not None else None) or ()
        if volume.name not in taken
    ]
    return ours + users


def _pod_options(template: ActorTemplate) -> dict[str, Any]:
    # The template's pod-level fields, each only when set (an unset one is the cluster's).
    found: dict[str, Any] = {}
    if template.image_pull_secrets:
        found["imagePullSecrets"] = [{"name": name} for name in template.image_pull_secrets]
    for key, value in (
        ("serviceAccountName", template.service_account_name),
        ("runtimeClassName", template.runtime_class_name),
        ("priorityClassName", template.priority_class_name),
    ):
        if value is not None:
            found[key] = value
    return found


def actor_pod_template(
    template: ActorTemplate,
    labels: Mapping[str, str],
    flavor: ResourceFlavor | None,
    config: OperatorConfig,
    *,
    actor: str,
    namespace: str,
    secret_name: str,
    extra_env: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The pod template of an actor serving `template` (an AsyncActor's spec or an ActorGroup
    member's): runtime and sidecar, drained for the actor's timeout, the sidecar sized for its
    batch, with the template's pod fields, volumes and placement on `flavor`."""
    run = execution(template)
    grace_s = drain_s(config, run.timeout_s)
    resources = sidecar_resources(
        config, run, template.sidecar.resources if template.sidecar is not None else None
    )
    pod_spec = {
        **_pod_options(template),
        "containers": [
            runtime_container(template, config, extra_env, grace_s=grace_s),
            sidecar_container(
                actor,
                namespace,
                secret_name,
                config,
                with_socket=True,
                grace_s=grace_s,
                resources=resources,
            ),
        ],
        "volumes": actor_volumes(template),
        **placement(flavor, template),
    }
    return pod_template(
        labels,
        pod_spec,
        config,
        grace_s=grace_s,
        extra_labels=template.pod_labels,
        extra_annotations=template.pod_annotations,
    )
