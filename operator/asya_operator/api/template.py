"""The parts every asya custom resource shares, and an actor's template: what one actor runs.

Constants of the API (group, version, the broker Secret's keys, patterns), the `doc` and
`Validation` helpers the CRDs are generated from, the sub-objects asya's resources are made of
(environment, resources, scaling, retry, batch, broker, tolerations, volume mounts, the
sidecar's resources), and `ActorTemplate`: the fields an AsyncActor's spec and an ActorGroup's
member template both are made of, declared once, the pod's escape hatches (pull secrets,
service account, runtime class, volumes, affinity, tolerations, node selector, labels,
annotations, priority class) among them. Field names are camelCase on the wire (`min_replicas`
is `minReplicas`).

Defaults are asya's, never retyped: they are read from `asya.actor.ActorOptions` (its
`scaling`, `resources` and `retry` among them), so a CR that leaves a field out gets the number
an `@actor` without that option gets.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal

import msgspec

from asya.actor import ActorOptions
from asya.settings import RuntimeSettings

GROUP: Final = "asya.sh"
"""API group of asya's custom resources."""

VERSION: Final = "v1alpha1"
"""The one served and stored version."""

BROKER_AMQP_URL_KEY: Final = "amqp-url"
"""Key of the broker Secret holding the AMQP URL (`amqp://user:pass@host:5672/vhost`) the
sidecar connects with; it reaches the sidecar container only, never the runtime's."""

BROKER_MANAGEMENT_URL_KEY: Final = "management-url"
"""Key of the broker Secret holding the RabbitMQ management API URL with credentials
(`http://user:pass@host:15672/vhost`), which KEDA reads queue depth from (unacked included)."""

DEFAULT_BROKER_SECRET: Final = "asya-broker"
"""Secret an AsyncActor uses when `spec.broker.secretName` is not set."""

HANDLER_PATTERN: Final = (
    r"^[A-Za-z_][A-Za-z0-9_]*([.][A-Za-z_][A-Za-z0-9_]*)*"
    r":[A-Za-z_][A-Za-z0-9_]*([.][A-Za-z_][A-Za-z0-9_]*)*$"
)
"""`module:attr` as `ASYA_HANDLER` takes it (dotted module, dotted attribute)."""


QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
"""A Kubernetes resource quantity (`500m`, `2`, `16Gi`), as the core API's own schema has it."""

DNS_SUBDOMAIN_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
"""A Kubernetes object name (DNS-1123 subdomain), such as a ResourceFlavor's or a Secret's."""

LABEL_VALUE_PATTERN: Final = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
"""A label's value, as Kubernetes takes it (at most 63 characters)."""

SOCKET_VOLUME: Final = "asya-socket"
"""The pod's volume holding the runtime's socket, shared by runtime and sidecar."""
TMP_VOLUME: Final = "tmp"
"""The runtime's writable /tmp (its root filesystem is read-only)."""
OPERATOR_VOLUMES: Final = (SOCKET_VOLUME, TMP_VOLUME)
"""Volume names the operator gives every actor pod: a template's own volumes may not take them."""
OPERATOR_MOUNT_PATHS: Final = ("/tmp", RuntimeSettings().socket_path.rsplit("/", 1)[0])
"""Where the operator mounts its volumes in the runtime container (with the default socket
path): a template's own mounts may not take these paths."""

OPERATOR_LABELS: Final = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/component",
    "asya.sh/actor",
    "asya.sh/group",
    "asya.sh/instance",
    "asya.sh/member",
    "apps.kubernetes.io/pod-index",
)
"""The labels the operator (or, for the pod index, a StatefulSet) sets on an actor's pods: its
selectors are built on them, so a template's own pod labels may not take these keys."""
OPERATOR_ANNOTATIONS: Final = ("prometheus.io/scrape", "prometheus.io/port", "prometheus.io/path")
"""The annotations the operator sets on every pod (where the sidecar's /metrics is)."""

_DEFAULTS: Final = ActorOptions()
_SCALING: Final = _DEFAULTS.scaling
_RESOURCES: Final = _DEFAULTS.resources
_RETRY: Final = _DEFAULTS.retry


def whole_seconds(seconds: float) -> int:
    """`seconds` as the whole number a CR takes (KEDA counts whole seconds; asya's defaults
    are whole numbers of seconds, kept so here).

    Raises:
        ValueError: `seconds` has a fraction.
    """
    if seconds != int(seconds):
        raise ValueError(f"{seconds} s is not a whole number of seconds")
    return int(seconds)


class Validation(msgspec.Struct, frozen=True, kw_only=True):
    """One CEL rule (`x-kubernetes-validations`) on the object it is attached to (`self`)."""

    rule: str
    """A CEL expression that is true for a valid object."""
    message: str
    """What the API server answers when the rule is false: what is wrong and how to fix it."""


def doc(text: str, **constraints: Any) -> msgspec.Meta:
    """A field's description (which the CRD carries) and its constraints."""
    return msgspec.Meta(description=text, **constraints)


_Quantity = Annotated[str, msgspec.Meta(pattern=QUANTITY_PATTERN)] | int
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
"""An int field of 0 or more."""
Positive = Annotated[int, msgspec.Meta(ge=1)]
"""An int field of 1 or more."""
ObjectName = Annotated[str, msgspec.Meta(max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)]
"""A Kubernetes object's name, as a field type."""

LIST_MAP_BY_NAME: Final = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}
"""A list whose items are merged by their `name` (server-side apply)."""
LIST_MAP_BY_TYPE: Final = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
"""A list whose items are merged by their `type` (conditions)."""

# Checked by a CEL rule, not by the type: the operator's decoding names a map's value as
# `[...]`, where the API server names its key. The bound stays in the schema, where the API
# server's cost estimate of the rule needs it.
_LabelValue = Annotated[str, msgspec.Meta(extra_json_schema={"maxLength": 63})]

OVERRIDE: Final = " Passed to the runtime, which applies it over the decorator's."
"""Said of every field the runtime applies over its `@actor` options."""


class EnvVar(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """An environment variable of the runtime container (Kubernetes' EnvVar)."""

    name: Annotated[str, doc("Variable name.", min_length=1)]
    value: Annotated[str | None, doc("Literal value.")] = None
    value_from: Annotated[
        dict[str, Any] | None,
        doc("A source for the value (secretKeyRef, configMapKeyRef, fieldRef, ...), as in core."),
    ] = None


class ActorResources(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What one replica asks the cluster for."""

    cpu: Annotated[
        _Quantity | None,
        doc("CPU request, a Kubernetes quantity (`500m`, `2`); unset = none."),
    ] = _RESOURCES.cpu
    memory: Annotated[
        _Quantity | None,
        doc("Memory request, a Kubernetes quantity (`512Mi`, `16Gi`); unset = none."),
    ] = _RESOURCES.memory
    gpus: Annotated[
        int, doc("Whole GPUs per replica (`nvidia.com/gpu`, request and limit).", ge=0)
    ] = _RESOURCES.gpus


class ScalingFallback(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Replicas KEDA keeps while it cannot read the queue depth (KEDA's `fallback`): with a
    management API that does not answer, an actor is neither scaled to zero nor left where
    the last read put it."""

    failure_threshold: Annotated[
        int, doc("Failed queue-depth reads in a row before the fallback replicas apply.", ge=1)
    ]
    replicas: Annotated[int, doc("Replicas run while the reads fail.", ge=0)]


class ScalingPolicy(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """How much one scaling step may change the replicas within a period (the HPA's)."""

    type: Annotated[Literal["Pods", "Percent"], doc("Pods: a count; Percent: of the current.")]
    value: Annotated[int, doc("The count or percentage.", ge=1)]
    period_seconds: Annotated[
        int, doc("The window the change is counted over, in seconds.", ge=1, le=1800)
    ]


class ScalingRules(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """The HPA's rules for one direction of scaling."""

    stabilization_window_seconds: Annotated[
        Annotated[int, msgspec.Meta(ge=0, le=3600)] | None,
        doc("Seconds of past recommendations the HPA takes the safest of (0 to 3600)."),
    ] = None
    select_policy: Annotated[
        Literal["Max", "Min", "Disabled"] | None,
        doc("Which policy wins when several apply (Max by default); Disabled: no scaling."),
    ] = None
    policies: Annotated[
        list[ScalingPolicy] | None, doc("The policies; the HPA's defaults when unset.")
    ] = None


class ScalingBehavior(
    msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True
):
    """The HPA's scaling behavior KEDA gives the actor (KEDA's
    `advanced.horizontalPodAutoscalerConfig.behavior`): how fast it scales up and down."""

    scale_up: Annotated[ScalingRules | None, doc("Rules for scaling up.")] = None
    scale_down: Annotated[ScalingRules | None, doc("Rules for scaling down.")] = None


class ActorScaling(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Replica bounds and the queue-depth rule KEDA's RabbitMQ scaler applies."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule="self.minReplicas <= self.maxReplicas",
            message="scaling.minReplicas must not be above scaling.maxReplicas:"
            " raise maxReplicas or lower minReplicas",
        ),
        Validation(
            rule="!has(self.fallback) || self.fallback.replicas <= self.maxReplicas",
            message="scaling.fallback.replicas must not be above scaling.maxReplicas:"
            " lower fallback.replicas or raise maxReplicas",
        ),
    )

    min_replicas: Annotated[
        int,
        doc("Replicas kept when the queue is empty; 0 lets the actor scale to zero.", ge=0),
    ] = _SCALING.min_replicas
    max_replicas: Annotated[int, doc("Most replicas the actor may scale to.", ge=1)] = (
        _SCALING.max_replicas
    )
    queue_length: Annotated[
        int,
        doc(
            "Messages (ready plus unacked) one replica is expected to handle (KEDA's value).", ge=1
        ),
    ] = _SCALING.queue_length
    activation_queue_length: Annotated[
        int,
        doc(
            "Queue depth above which an actor at zero replicas is started (KEDA's"
            " activationValue).",
            ge=0,
        ),
    ] = _SCALING.activation
    polling_interval: Annotated[
        int, doc("Seconds between queue-depth checks (KEDA's pollingInterval).", ge=1)
    ] = whole_seconds(_SCALING.polling_interval_s)
    cooldown_period: Annotated[
        int,
        doc(
            "Seconds of an idle queue before scaling back to minReplicas (KEDA's cooldownPeriod).",
            ge=0,
        ),
    ] = whole_seconds(_SCALING.cooldown_s)
    paused: Annotated[
        bool | None,
        doc(
            "true: stop scaling the actor; KEDA keeps its replicas where they are until this is"
            " false or unset again (KEDA's autoscaling.keda.sh/paused annotation)."
        ),
    ] = None
    fallback: Annotated[
        ScalingFallback | None,
        doc("Replicas kept while KEDA cannot read the queue depth (none: KEDA's own handling)."),
    ] = None
    behavior: Annotated[
        ScalingBehavior | None,
        doc("How fast the actor scales up and down (the HPA's behavior; none: its defaults)."),
    ] = None


class ActorRetry(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Override of the decorator's RetryPolicy: when set, it replaces that policy whole, and a
    field left out takes RetryPolicy's default, as in `@actor(retry=RetryPolicy(...))`. The
    exception types retried stay the decorator's."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule="self.baseDelayMs <= self.maxDelayMs",
            message="retry.baseDelayMs must not be above retry.maxDelayMs:"
            " raise maxDelayMs or lower baseDelayMs",
        ),
        Validation(
            rule="self.jitter >= 0.0 && self.jitter <= 1.0",
            message="retry.jitter is a fraction of each delay: set it between 0.0 and 1.0",
        ),
        Validation(
            rule="self.factor >= 1.0",
            message="retry.factor must be at least 1.0 (delays never shrink): set it to 1.0"
            " or more",
        ),
    )

    max_attempts: Annotated[
        int, doc("Calls at most per envelope, the first included (1 = never retry).", ge=1)
    ] = _RETRY.max_attempts
    base_delay_ms: Annotated[
        int, doc("Delay before the second attempt, in milliseconds.", ge=0)
    ] = _RETRY.base_delay_ms
    factor: Annotated[float, doc("Each further delay is this many times the one before.")] = (
        _RETRY.factor
    )
    max_delay_ms: Annotated[
        int, doc("No delay is longer than this, in milliseconds, jitter included.", ge=0)
    ] = _RETRY.max_delay_ms
    jitter: Annotated[
        float, doc("Up to this fraction of each delay is taken off at random (0.0 to 1.0).")
    ] = _RETRY.jitter
    retry_timeouts: Annotated[
        bool, doc("Whether a call that ran past the actor's timeout is tried again.")
    ] = _RETRY.retry_timeouts


class ActorBatch(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Override of the decorator's batching: up to `size` envelopes per call, waiting `waitMs`
    (unset: the decorator's wait) for a batch to fill."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule="self.size >= 1",
            message="batch.size is the most envelopes per call: set it to 1 or more",
        ),
    )

    size: Annotated[int, doc("Most envelopes per call.")]
    wait_ms: Annotated[
        NonNegative | None,
        doc(
            "Milliseconds to wait for a batch to fill before calling with fewer; unset = the"
            " decorator's batch_wait_ms."
        ),
    ] = None


class BrokerRef(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Where the broker's credentials are: a Secret in the actor's namespace, never the CR."""

    secret_name: Annotated[
        str,
        doc(
            f"Secret with key `{BROKER_AMQP_URL_KEY}` (AMQP URL, given to the sidecar only) and"
            f" key `{BROKER_MANAGEMENT_URL_KEY}` (RabbitMQ management API URL with credentials,"
            " read by KEDA's TriggerAuthentication).",
            max_length=253,
            pattern=DNS_SUBDOMAIN_PATTERN,
        ),
    ] = DEFAULT_BROKER_SECRET


class Condition(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One aspect of the actor's state (`Ready`, `Scaling`, `Degraded`), as in metav1.Condition."""

    type: Annotated[
        str,
        doc(
            "Which aspect: Ready, Scaling, Degraded; QuotaReserved, Admitted, Preempted.",
            max_length=316,
        ),
    ]
    status: Annotated[Literal["True", "False", "Unknown"], doc("True, False or Unknown.")]
    reason: Annotated[str | None, doc("CamelCase reason for the last transition.")] = None
    message: Annotated[str | None, doc("What happened, in words, naming any missing object.")] = (
        None
    )
    last_transition_time: Annotated[
        str | None,
        doc("When status last changed (RFC 3339).", extra_json_schema={"format": "date-time"}),
    ] = None
    observed_generation: Annotated[
        NonNegative | None,
        doc("The object's metadata.generation this condition was set from."),
    ] = None


TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
"""A taint's effect, as in core."""


class Toleration(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A toleration an actor's pods get (core Toleration)."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule="has(self.key) || (has(self.operator) && self.operator == 'Exists')",
            message="a toleration without a key matches every taint: set operator: Exists, or"
            " give a key",
        ),
        Validation(
            rule="!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
            message="tolerationSeconds applies to NoExecute taints only: set effect: NoExecute or"
            " remove tolerationSeconds",
        ),
        Validation(
            rule="!(has(self.operator) && self.operator == 'Exists' && has(self.value))",
            message="a toleration with operator: Exists matches any value: remove value",
        ),
    )

    key: Annotated[str | None, doc("Taint key matched; unset = every key.")] = None
    operator: Annotated[
        Literal["Equal", "Exists"] | None, doc("Equal (the default) or Exists.")
    ] = None
    value: Annotated[str | None, doc("Taint value matched (operator Equal).")] = None
    effect: Annotated[TaintEffect | None, doc("Taint effect matched; unset = every effect.")] = None
    toleration_seconds: Annotated[
        int | None,
        doc("How long a NoExecute taint is tolerated before eviction, in seconds."),
    ] = None


_Source = Annotated[
    dict[str, Any] | None,
    doc(
        "A volume source as in core (free-form here: the API server checks it with the pod,"
        " strictly)."
    ),
]


# Core Kubernetes types a template passes to its pods: affinity and the common volume sources,
# typed field for field as core v1 has them (Affinity, VolumeSource), so that a misspelt field
# (`nodeAffinty`, `emptyDir: {medum: Memory}`) is refused where the API server refuses one in a
# Pod: by the CRD's structural schema, by `asya-operator plan` offline and by the pipeline
# chart's values schema. A volume source not typed here stays free-form (`_Source`).
_Core = {"frozen": True, "kw_only": True, "rename": "camel", "omit_defaults": True}
"""How every core type here is declared: camelCase on the wire, unset fields left out."""

_Weight = Annotated[int, doc("Weight, 1 to 100: higher is preferred more.", ge=1, le=100)]
# No bound on these lists: core has none (a node affinity may list hundreds of hosts), and no
# CEL rule walks them.
_Strings = list[str]


class NodeSelectorRequirement(msgspec.Struct, **_Core):
    """A node label (or field) requirement (core NodeSelectorRequirement)."""

    key: Annotated[str, doc("The label key (or field name) the requirement is on.", min_length=1)]
    operator: Annotated[
        Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"],
        doc("How the key's value relates to `values`."),
    ]
    values: Annotated[
        _Strings | None, doc("Values: several for In/NotIn, one for Gt/Lt, none for Exists.")
    ] = None


class NodeSelectorTerm(msgspec.Struct, **_Core):
    """Node requirements that must all hold (core NodeSelectorTerm)."""

    match_expressions: Annotated[
        list[NodeSelectorRequirement] | None, doc("Requirements on node labels.")
    ] = None
    match_fields: Annotated[
        list[NodeSelectorRequirement] | None, doc("Requirements on node fields.")
    ] = None


class NodeSelector(msgspec.Struct, **_Core):
    """Terms any one of which a node must meet (core NodeSelector)."""

    node_selector_terms: Annotated[list[NodeSelectorTerm], doc("The terms, ORed.", min_length=1)]


class PreferredSchedulingTerm(msgspec.Struct, **_Core):
    """A weighted node preference (core PreferredSchedulingTerm)."""

    weight: _Weight
    preference: Annotated[NodeSelectorTerm, doc("The node requirements preferred.")]


class NodeAffinity(msgspec.Struct, **_Core):
    """Which nodes the pods may, and would rather, run on (core NodeAffinity)."""

    required_during_scheduling_ignored_during_execution: Annotated[
        NodeSelector | None, doc("Nodes the pods must run on.")
    ] = None
    preferred_during_scheduling_ignored_during_execution: Annotated[
        list[PreferredSchedulingTerm] | None, doc("Nodes the pods would rather run on.")
    ] = None


class LabelSelectorRequirement(msgspec.Struct, **_Core):
    """A label requirement (core LabelSelectorRequirement)."""

    key: Annotated[str, doc("The label key.", min_length=1)]
    operator: Annotated[
        Literal["In", "NotIn", "Exists", "DoesNotExist"],
        doc("How the label's value relates to `values`."),
    ]
    values: Annotated[_Strings | None, doc("Values, for In and NotIn.")] = None


class LabelSelector(msgspec.Struct, **_Core):
    """A label query (core LabelSelector): every requirement holds."""

    match_labels: Annotated[dict[str, str] | None, doc("Labels that must equal these.")] = None
    match_expressions: Annotated[
        list[LabelSelectorRequirement] | None, doc("More requirements on labels.")
    ] = None


class PodAffinityTerm(msgspec.Struct, **_Core):
    """Pods that must (or must not) share a topology domain with these (core PodAffinityTerm)."""

    topology_key: Annotated[
        str, doc("The node label whose value is the domain (a zone, a host).", min_length=1)
    ]
    label_selector: Annotated[LabelSelector | None, doc("The pods this term is about.")] = None
    namespace_selector: Annotated[
        LabelSelector | None, doc("Namespaces those pods are looked for in.")
    ] = None
    namespaces: Annotated[_Strings | None, doc("Namespaces, by name.")] = None
    match_label_keys: Annotated[
        _Strings | None, doc("Label keys whose values the pods must share with the new one.")
    ] = None
    mismatch_label_keys: Annotated[
        _Strings | None, doc("Label keys whose values the pods must not share with it.")
    ] = None


class WeightedPodAffinityTerm(msgspec.Struct, **_Core):
    """A weighted pod (anti-)affinity preference (core WeightedPodAffinityTerm)."""

    weight: _Weight
    pod_affinity_term: Annotated[PodAffinityTerm, doc("The term preferred.")]


class PodAffinity(msgspec.Struct, **_Core):
    """Pods to run beside (core PodAffinity; PodAntiAffinity has the same fields)."""

    required_during_scheduling_ignored_during_execution: Annotated[
        list[PodAffinityTerm] | None, doc("Terms that must hold.")
    ] = None
    preferred_during_scheduling_ignored_during_execution: Annotated[
        list[WeightedPodAffinityTerm] | None, doc("Terms preferred.")
    ] = None


class Affinity(msgspec.Struct, **_Core):
    """The pods' affinity (core Affinity)."""

    node_affinity: Annotated[NodeAffinity | None, doc("Which nodes.")] = None
    pod_affinity: Annotated[PodAffinity | None, doc("Beside which pods.")] = None
    pod_anti_affinity: Annotated[PodAffinity | None, doc("Away from which pods.")] = None


_Mode = Annotated[int, doc("File mode bits (0 to 0777).", ge=0, le=0o777)]


class KeyToPath(msgspec.Struct, **_Core):
    """One key of a ConfigMap or Secret as a file (core KeyToPath)."""

    key: Annotated[str, doc("The key.", min_length=1)]
    path: Annotated[str, doc("The file's relative path.", min_length=1)]
    mode: _Mode | None = None


class EmptyDirVolumeSource(msgspec.Struct, **_Core):
    """A directory that lives as long as the pod (core EmptyDirVolumeSource)."""

    medium: Annotated[
        Annotated[str, msgspec.Meta(pattern=r"^(|Memory|HugePages(-.+)?)$")] | None,
        doc(
            "Memory: a tmpfs (the /dev/shm recipe); HugePages or HugePages-<size>: huge pages;"
            " unset or '': the node's disk."
        ),
    ] = None
    size_limit: Annotated[
        Annotated[str, msgspec.Meta(pattern=QUANTITY_PATTERN)] | int | None,
        doc("Largest size, as a quantity (`1Gi`)."),
    ] = None


class ConfigMapVolumeSource(msgspec.Struct, **_Core):
    """A ConfigMap's keys as files (core ConfigMapVolumeSource)."""

    name: Annotated[str, doc("The ConfigMap.", min_length=1)]
    items: Annotated[list[KeyToPath] | None, doc("Keys to project; unset = every key.")] = None
    default_mode: _Mode | None = None
    optional: Annotated[bool | None, doc("Whether the ConfigMap may be missing.")] = None


class SecretVolumeSource(msgspec.Struct, **_Core):
    """A Secret's keys as files (core SecretVolumeSource)."""

    secret_name: Annotated[str, doc("The Secret.", min_length=1)]
    items: Annotated[list[KeyToPath] | None, doc("Keys to project; unset = every key.")] = None
    default_mode: _Mode | None = None
    optional: Annotated[bool | None, doc("Whether the Secret may be missing.")] = None


class PersistentVolumeClaimVolumeSource(msgspec.Struct, **_Core):
    """A PersistentVolumeClaim's volume (core PersistentVolumeClaimVolumeSource)."""

    claim_name: Annotated[str, doc("The claim, in the pod's namespace.", min_length=1)]
    read_only: Annotated[bool | None, doc("Mount it read-only.")] = None


class HostPathVolumeSource(msgspec.Struct, **_Core):
    """A path on the node (core HostPathVolumeSource)."""

    path: Annotated[str, doc("The path on the node.", min_length=1)]
    type: Annotated[
        Literal[
            "",
            "DirectoryOrCreate",
            "Directory",
            "FileOrCreate",
            "File",
            "Socket",
            "CharDevice",
            "BlockDevice",
        ]
        | None,
        doc("What must be there; unset or '': no check."),
    ] = None


class Volume(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A volume of the actor's pods (core Volume): a name and one source. The common sources
    (emptyDir, configMap, secret, persistentVolumeClaim, hostPath) are typed as core has them,
    so a misspelt field is refused with the CR; the others are free-form, checked by the API
    server with the Deployment or StatefulSet."""

    name: Annotated[
        str, doc("The volume's name, which `volumeMounts` refer to.", min_length=1, max_length=63)
    ]
    aws_elastic_block_store: _Source = None
    azure_disk: _Source = None
    azure_file: _Source = None
    cephfs: _Source = None
    cinder: _Source = None
    config_map: Annotated[ConfigMapVolumeSource | None, doc("A ConfigMap's keys as files.")] = None
    csi: _Source = None
    downward_api: _Source = msgspec.field(default=None, name="downwardAPI")
    empty_dir: Annotated[
        EmptyDirVolumeSource | None,
        doc("A directory as long-lived as the pod (medium Memory: the /dev/shm recipe)."),
    ] = None
    ephemeral: _Source = None
    fc: _Source = None
    flex_volume: _Source = None
    flocker: _Source = None
    gce_persistent_disk: _Source = None
    git_repo: _Source = None
    glusterfs: _Source = None
    host_path: Annotated[HostPathVolumeSource | None, doc("A path on the node.")] = None
    image: _Source = None
    iscsi: _Source = None
    nfs: _Source = None
    persistent_volume_claim: Annotated[
        PersistentVolumeClaimVolumeSource | None, doc("A PersistentVolumeClaim's volume.")
    ] = None
    photon_persistent_disk: _Source = None
    portworx_volume: _Source = None
    projected: _Source = None
    quobyte: _Source = None
    rbd: _Source = None
    scale_io: _Source = msgspec.field(default=None, name="scaleIO")
    secret: Annotated[SecretVolumeSource | None, doc("A Secret's keys as files.")] = None
    storageos: _Source = None
    vsphere_volume: _Source = None


class VolumeMount(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Where one of the template's volumes appears in the runtime container (core VolumeMount)."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule="!(self.mountPath in ["
            + ", ".join(f"'{path}'" for path in OPERATOR_MOUNT_PATHS)
            + "])",
            message="volumeMounts: "
            + " and ".join(OPERATOR_MOUNT_PATHS)
            + " are where the operator mounts the runtime's /tmp and socket: mount elsewhere",
        ),
    )

    name: Annotated[
        str, doc("The volume mounted: a name in `volumes`.", min_length=1, max_length=63)
    ]
    mount_path: Annotated[
        str,
        doc("Absolute path in the runtime container.", min_length=1, max_length=1024, pattern="^/"),
    ]
    read_only: Annotated[bool | None, doc("Mount read-only.")] = None
    sub_path: Annotated[
        Annotated[str, msgspec.Meta(max_length=1024)] | None,
        doc("Mount this path inside the volume instead of its root."),
    ] = None


class ResourceList(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """CPU and memory, as Kubernetes quantities."""

    cpu: Annotated[_Quantity | None, doc("CPU, a Kubernetes quantity (`50m`, `1`).")] = None
    memory: Annotated[_Quantity | None, doc("Memory, a Kubernetes quantity (`256Mi`).")] = None


class SidecarResources(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The sidecar container's requests and limits: each value given replaces the derived one
    (see `ActorTemplate.sidecar`); a memory request given without a memory limit sets the limit
    too."""

    requests: Annotated[ResourceList | None, doc("What the sidecar is guaranteed.")] = None
    limits: Annotated[ResourceList | None, doc("What the sidecar may use at most.")] = None


class SidecarOptions(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The sidecar container of the actor's pods."""

    resources: Annotated[
        SidecarResources | None,
        doc(
            "Requests and limits of the sidecar; unset (or a value left out) = derived: CPU the"
            " operator's sidecarCpu, memory the operator's sidecarMemory plus room for the"
            " envelopes it holds in flight (see docs/kubernetes.md)."
        ),
    ] = None


def template_validations(path: str) -> tuple[Validation, ...]:
    """The CEL rules on an `ActorTemplate` (its image, handler, volumes, pod labels and
    annotations), their messages naming the template by its path in the resource (`spec`,
    `template`)."""
    reserved_volumes = ", ".join(f"'{name}'" for name in OPERATOR_VOLUMES)
    reserved_labels = ", ".join(f"'{key}'" for key in OPERATOR_LABELS)
    reserved_annotations = ", ".join(f"'{key}'" for key in OPERATOR_ANNOTATIONS)
    return (
        Validation(
            rule="size(self.image) > 0",
            message=f"{path}.image is empty: set the container image holding the handler's code",
        ),
        Validation(
            rule="size(self.handler) > 0",
            message=f"{path}.handler is empty: set it to module:attr, e.g. my_app.text:normalize",
        ),
        Validation(
            # An empty handler gets the message above, not this one as well.
            rule=f"size(self.handler) == 0 || self.handler.matches('{HANDLER_PATTERN}')",
            message=f"{path}.handler must look like module:attr (a dotted module, a colon, the"
            " function or class), e.g. my_app.text:normalize",
        ),
        Validation(
            rule="!has(self.volumeMounts) || self.volumeMounts.all(m, has(self.volumes) &&"
            " self.volumes.exists(v, v.name == m.name))",
            message=f"{path}.volumeMounts names a volume that {path}.volumes does not have: add"
            " the volume or fix the mount's name",
        ),
        Validation(
            rule=f"!has(self.volumes) || self.volumes.all(v, !(v.name in [{reserved_volumes}]))",
            message=f"{path}.volumes: {' and '.join(OPERATOR_VOLUMES)} are the operator's"
            " volume names (the runtime's socket and /tmp): rename yours",
        ),
        # Each reserved key is looked up in the map (constant cost), rather than each of the
        # user's keys compared: the API server bounds a rule's estimated cost.
        Validation(
            rule="!has(self.podLabels) || self.podLabels.all(k, size(self.podLabels[k]) <= 63"
            f" && self.podLabels[k].matches('{LABEL_VALUE_PATTERN}'))",
            message=f"{path}.podLabels: a label's value is at most 63 letters, digits, '-', '_'"
            " or '.', starting and ending with a letter or digit (or empty): fix the value",
        ),
        Validation(
            rule=f"!has(self.podLabels) || ![{reserved_labels}].exists(k, k in self.podLabels)",
            message=f"{path}.podLabels: {', '.join(OPERATOR_LABELS)} are the operator's labels"
            " (its selectors use them): remove them",
        ),
        Validation(
            rule="!has(self.podAnnotations) ||"
            f" ![{reserved_annotations}].exists(k, k in self.podAnnotations)",
            message=f"{path}.podAnnotations: {', '.join(OPERATOR_ANNOTATIONS)} are the"
            " operator's (where the sidecar's /metrics is): remove them",
        ),
    )


class ActorTemplate(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What one actor's pods run: image, handler, environment, what one replica asks for and
    the flavor it is placed on. An AsyncActor's spec and an ActorGroup member's template are
    made of it (its fields first); each declares its own `VALIDATIONS`, from
    `template_validations`."""

    image: Annotated[
        str,
        doc("Container image with the handler's code and asya installed.", max_length=1024),
    ]
    handler: Annotated[
        str,
        doc("The actor's handler as `module:attr` (the runtime's ASYA_HANDLER).", max_length=512),
    ]
    env: Annotated[
        Annotated[list[EnvVar], msgspec.Meta(extra_json_schema=LIST_MAP_BY_NAME)] | None,
        doc("Extra environment variables of the runtime container."),
    ] = None
    env_from: Annotated[
        list[dict[str, Any]] | None,
        doc(
            "ConfigMaps and Secrets exposed as variables to the runtime container (EnvFromSource)."
        ),
    ] = None
    resources: Annotated[ActorResources, doc("What one replica asks the cluster for.")] = (
        msgspec.field(default_factory=ActorResources)
    )
    flavor: Annotated[
        ObjectName | None,
        doc("ResourceFlavor whose node labels and tolerations the pods get; unset = none."),
    ] = None
    image_pull_secrets: Annotated[
        Annotated[list[ObjectName], msgspec.Meta(max_length=16)] | None,
        doc(
            "Secrets (names, in the actor's namespace) holding registry credentials for the"
            " images; the pod's imagePullSecrets."
        ),
    ] = None
    service_account_name: Annotated[
        ObjectName | None,
        doc(
            "ServiceAccount the pods run as (workload identity); its API token is not mounted."
            " Unset = the namespace's default."
        ),
    ] = None
    runtime_class_name: Annotated[
        ObjectName | None,
        doc("RuntimeClass of the pods (e.g. `nvidia`); unset = the cluster's default."),
    ] = None
    priority_class_name: Annotated[
        ObjectName | None,
        doc(
            "PriorityClass of the pods (the scheduler's preemption; asya's own admission"
            " priority is `priority`); unset = none."
        ),
    ] = None
    volumes: Annotated[
        Annotated[list[Volume], msgspec.Meta(max_length=32, extra_json_schema=LIST_MAP_BY_NAME)]
        | None,
        doc(
            "Extra volumes of the pod, as core Volumes (a name and one source: emptyDir,"
            " configMap, secret, persistentVolumeClaim, ...); mounted in the runtime container"
            " by `volumeMounts`. The source's own fields are not checked here: the API server"
            " checks them when it takes the pods' Deployment or StatefulSet."
        ),
    ] = None
    volume_mounts: Annotated[
        Annotated[
            list[VolumeMount],
            msgspec.Meta(
                max_length=32,
                extra_json_schema={
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["mountPath"],
                },
            ),
        ]
        | None,
        doc("Where `volumes` appear in the runtime container."),
    ] = None
    affinity: Annotated[
        Affinity | None,
        doc("The pods' affinity (node, pod and pod anti-affinity), as core Affinity."),
    ] = None
    tolerations: Annotated[
        Annotated[list[Toleration], msgspec.Meta(max_length=32)] | None,
        doc("Tolerations the pods get after the flavor's."),
    ] = None
    node_selector: Annotated[
        Annotated[dict[str, str], msgspec.Meta(max_length=32)] | None,
        doc(
            "Node labels the pods require besides the flavor's; on a key the flavor also sets,"
            " the flavor's value wins (its quota is for its nodes)."
        ),
    ] = None
    pod_labels: Annotated[
        Annotated[dict[str, _LabelValue], msgspec.Meta(max_length=64)] | None,
        doc(
            "Extra labels of the pods; the keys the operator sets (asya.sh/actor, the"
            " app.kubernetes.io ones, ...) are refused."
        ),
    ] = None
    pod_annotations: Annotated[
        Annotated[dict[str, str], msgspec.Meta(max_length=64)] | None,
        doc("Extra annotations of the pods; the operator's prometheus.io ones are refused."),
    ] = None
    sidecar: Annotated[
        SidecarOptions | None, doc("The sidecar container's resources; unset = derived.")
    ] = None
