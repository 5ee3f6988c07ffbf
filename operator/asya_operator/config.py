"""The operator's own settings: what every actor's pod gets that no AsyncActor decides.

One frozen Struct with a default and a docstring per field. `asya-operator plan` takes
`--sidecar-image`; the controller reads every field from its own environment at start
(`load_operator_config`, `ASYA_OPERATOR_{FIELD}`). The `plan_*` functions take this object as
an argument and read nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Final, Literal

import msgspec

from asya.settings import RuntimeSettings, SidecarSettings, load_group

ENV_PREFIX: Final = "ASYA_OPERATOR_"
"""Prefix of the operator's own variables: `sidecar_image` is `ASYA_OPERATOR_SIDECAR_IMAGE`."""

DEFAULT_SIDECAR_IMAGE: Final = "ghcr.io/asya-sh/asya-sidecar:0.1.0"
"""The sidecar image when none is configured: asya's own release, the same version as asya."""

GangScheduler = Literal["none", "kubernetes", "volcano", "kai"]
"""Who places an admitted ActorGroup instance's pods whole: nobody but the default scheduler
(`none`), or a gang-aware scheduler given a group object per instance
(`asya_operator.plans.gangs`)."""

Admission = Literal["builtin", "kueue"]
"""Who admits actors' replicas and gang instances: asya's own quota (`builtin`: ResourcePools,
Cohorts), or Kueue (`kueue`: each pool name is a LocalQueue; `asya_operator.plans.kueue`)."""

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SECRET_REF: Final = rf"^$|^{_LABEL}/{_LABEL}(\.{_LABEL})*$"
"""Empty, or `namespace/name` of a Secret."""

_RUNTIME: Final = RuntimeSettings()
_SIDECAR: Final = SidecarSettings()


class OperatorConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What the operator puts in every actor's pod besides what the AsyncActor says."""

    sidecar_image: str = DEFAULT_SIDECAR_IMAGE
    """Image of the sidecar container (`asya-sidecar` on its PATH); one for every actor."""
    grace_s: int = int(_RUNTIME.grace_s)
    """Seconds runtime and sidecar get at least to finish in-flight calls after SIGTERM
    (ASYA_GRACE_S, given to both so they drain together; an actor whose timeout is longer gets
    its timeout); asya's default."""
    termination_margin_s: int = 15
    """Seconds added to `grace_s` for terminationGracePeriodSeconds: time to requeue what is
    left and close the broker connection before the kubelet kills the pod."""
    health_port: int = _SIDECAR.health_port
    """The sidecar's port for /healthz and /readyz (ASYA_HEALTH_PORT)."""
    socket_path: str = _RUNTIME.socket_path
    """The runtime's Unix socket (ASYA_SOCKET_PATH); its directory is the shared emptyDir."""
    run_as_user: int = 65532
    """UID (and GID, fsGroup) of both containers: non-root, and the same for both so the
    sidecar may open the socket the runtime creates with mode 0660."""
    startup_timeout_s: int = 900
    """How long the runtime may take to load its handler (a model) before it counts as failed:
    the startupProbe's period times its failure threshold."""
    sidecar_cpu: str = "50m"
    """CPU request of the sidecar container."""
    sidecar_memory: str = "128Mi"
    """Memory of the sidecar process itself: an actor's sidecar gets it plus room for the
    envelopes it holds in flight (`plans.pods.sidecar_memory`), an end actor's exactly it."""
    port: int = 8080
    """The operator's own port: GET /healthz (liveness) and GET /metrics (Prometheus)."""
    recheck_s: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    """Seconds between checks of an actor left Degraded (its Secret or flavor missing) or whose
    queues could not be declared: it recovers this long at most after the cause is fixed."""
    api_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 60.0
    """Seconds one call to the API server may wait to connect, and then for each read, and
    the longest any one step of the operator waits on the API server (a read, the applies of
    one object set) before it fails (an admission pass that fails is tried again
    `recheck_s` later). Time a call waits for one of `api_threads` is not counted."""
    api_threads: Annotated[int, msgspec.Meta(ge=1)] = 16
    """Calls to the API server the operator makes at once, each on a thread of its own with
    its connection kept; more wait their turn (a burst of reconciles queues here, not at the
    API server)."""
    admission: Admission = "builtin"
    """builtin: asya admits replicas and gang instances against its ResourcePools; kueue:
    Kueue does, each pod in the LocalQueue its pool names (an AsyncActor's replicas as
    Kueue's pods, each ActorGroup instance as one Kueue pod group), and asya reads Kueue's
    decisions back into its statuses."""
    gang_scheduler: GangScheduler = "none"
    """The gang scheduler of ActorGroups that name none (`spec.scheduling.gangScheduler`):
    none, kubernetes (the Workload API's PodGroup, Kubernetes 1.37), volcano or kai."""
    require_pool_for_accelerators: bool = False
    """Refuse an AsyncActor or ActorGroup that asks for GPUs and has no pool (neither
    `spec.pool` nor its namespace's `asya.sh/default-pool` label): it is Degraded
    (PoolRequired) and nothing is applied for it, so no GPU runs outside quota."""
    broker_admin_secret: Annotated[str, msgspec.Meta(pattern=_SECRET_REF)] = ""
    """`namespace/name` of a Secret holding a RabbitMQ administrator's `amqp-url` and
    `management-url` (the operator's own namespace, never a team's). Set: the operator makes
    each namespace's broker identity (its vhost and users, docs/tenancy.md) and its
    `asya-broker` Secret when an actor needs it and none exists, and removes them with the
    namespace's last actor. Empty: the platform makes them."""


def operator_env_var(field_name: str) -> str:
    """The variable a field is read from: `recheck_s` -> `ASYA_OPERATOR_RECHECK_S`."""
    return ENV_PREFIX + field_name.upper()


def load_operator_config(environ: Mapping[str, str]) -> OperatorConfig:
    """The operator's config from `environ` (pass `os.environ` at start); unset fields default.

    Raises:
        SettingsError: a variable's value does not parse as its field's type.
    """
    return load_group(OperatorConfig, environ, operator_env_var)
