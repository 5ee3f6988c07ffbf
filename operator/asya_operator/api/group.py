"""The ActorGroup custom resource: members that must run together, as they travel the API.

An ActorGroup is a gang: its members (actor templates with replica counts) are admitted
together, whole, or not at all; `spec.replicas` is the number of gang instances, which KEDA
may drive through the scale subresource. A member's template is the `ActorTemplate` an
AsyncActor's spec is made of too (image, handler, env, resources, flavor, the pod's fields),
and defaults are asya's (`ActorOptions`' priority, `ReadinessPolicy`'s timeout and backoff),
never retyped.
`asya_operator.api.crds` builds the CRD from these Structs; `asya_operator.plans.whatif` turns
each instance into an admission workload for `asya-operator plan`, and the controller
(`asya_operator.handlers.groups`) runs them.

Each member is an actor named `{group}-{member}` (its queue `asya.{namespace}.{group}-{member}`,
shared by every instance); each admitted instance runs one StatefulSet per member,
`{group}-{member}-{instance}`, so member pods have a stable ordinal to rank by. The length
limits below keep those names within what Kubernetes accepts.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final

import msgspec

from asya.actor import ActorOptions
from asya.admission.readiness import GangPhase, ReadinessPolicy
from asya.envelope import ACTOR_NAME_PATTERN
from asya_operator.api.template import (
    GROUP,
    LIST_MAP_BY_NAME,
    LIST_MAP_BY_TYPE,
    VERSION,
    ActorScaling,
    ActorTemplate,
    BrokerRef,
    Condition,
    ObjectName,
    Validation,
    doc,
    template_validations,
    whole_seconds,
)
from asya_operator.config import GangScheduler

DEFAULT_INSTANCES: Final = 1
"""Gang instances of an ActorGroup that leaves `spec.replicas` out."""

MAX_MEMBERS: Final = 8
"""Most members a group has: Kueue's limit on a workload's pod sets."""

MEMBER_NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A member's name: a DNS label, as it becomes part of its pods' names."""

MAX_INSTANCES: Final = 999
"""Most gang instances a group may have (an instance's index is part of object names)."""

REACTIVATE_ANNOTATION: Final = "asya.sh/reactivate"
"""Set (to any new value) on an ActorGroup to put its deactivated instances back in the queue."""

MEMBER_ACTOR_NAME_MAX_LENGTH: Final = 48
"""Longest `{group}-{member}`: its StatefulSet `{group}-{member}-{instance}` must stay within
52 characters, the most a StatefulSet name may have for its pods' revision-hash label."""

_ACTOR_DEFAULTS: Final = ActorOptions()
_READINESS: Final = ReadinessPolicy()


class MemberTemplate(ActorTemplate, frozen=True, kw_only=True, rename="camel"):
    """The actor each replica of a member runs: image, handler, environment, what it asks for."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        *template_validations("template"),
        Validation(
            rule="!has(self.timeoutSeconds) || self.timeoutSeconds > 0.0",
            message="template.timeoutSeconds must be above 0: give the seconds a call may take,"
            " or leave it out to keep the decorator's timeout",
        ),
    )

    timeout_seconds: Annotated[
        float | None,
        doc(
            "Override of the decorator's timeout_s; unset = the decorator's. A pod drains for at"
            " least this long on SIGTERM (its termination grace follows)."
        ),
    ] = None


class GroupMember(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One member of the gang: an actor template and how many replicas of it one instance has."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule="!has(self.minReplicas) || self.minReplicas <= self.replicas",
            message="a member's minReplicas must not be above its replicas: lower minReplicas or"
            " raise replicas",
        ),
    )

    name: Annotated[
        str,
        doc("The member's name, unique in the group.", max_length=63, pattern=MEMBER_NAME_PATTERN),
    ]
    replicas: Annotated[int, doc("Replicas of this member in one gang instance.", ge=1)]
    min_replicas: Annotated[
        Annotated[int, msgspec.Meta(ge=1)] | None,
        doc(
            "Admit an instance with as few as this many replicas of the member when the full"
            " count does not fit (the largest count that fits); unset = all replicas or none."
        ),
    ] = None
    template: Annotated[MemberTemplate, doc("The actor each replica runs.")]


class Requeuing(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """How an instance evicted for not becoming ready is requeued (Kueue's requeuingStrategy):
    the n-th eviction waits `backoffBaseSeconds * 2^(n-1)`, at most `backoffMaxSeconds`."""

    backoff_base_seconds: Annotated[
        int, doc("Wait before the first requeue, in seconds.", ge=0)
    ] = whole_seconds(_READINESS.backoff_base_s)
    backoff_max_seconds: Annotated[int, doc("No requeue waits longer, in seconds.", ge=0)] = (
        whole_seconds(_READINESS.backoff_max_s)
    )
    backoff_limit_count: Annotated[
        Annotated[int, msgspec.Meta(ge=0)] | None,
        doc(
            "Evictions before the instance is deactivated (it then waits until reactivated with"
            f" the `{REACTIVATE_ANNOTATION}` annotation); unset = requeue for ever."
        ),
    ] = _READINESS.backoff_limit


class GangScheduling(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The gang-aware scheduler that places each admitted instance's pods whole, or none."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule="!has(self.queue) || !has(self.gangScheduler)"
            " || self.gangScheduler in ['volcano', 'kai']",
            message="scheduling.queue names a Volcano or KAI queue: set gangScheduler to volcano"
            " or kai, or remove queue",
        ),
        Validation(
            rule="!has(self.schedulerName) || !has(self.gangScheduler)"
            " || self.gangScheduler != 'none'",
            message="scheduling.schedulerName is for a gang scheduler: set gangScheduler, or"
            " remove schedulerName",
        ),
    )

    gang_scheduler: Annotated[
        GangScheduler | None,
        doc(
            "none: the default scheduler places pods one by one; kubernetes: a PodGroup of"
            " scheduling.k8s.io/v1beta1 per instance (Kubernetes 1.37, the GenericWorkload and"
            " GangScheduling feature gates); volcano: a Volcano PodGroup; kai: a KAI PodGroup."
            " Unset = the operator's default (ASYA_OPERATOR_GANG_SCHEDULER, none unless set)."
        ),
    ] = None
    queue: Annotated[
        ObjectName | None,
        doc(
            "The Volcano or KAI queue the instances' PodGroups go to; unset = the scheduler's"
            " default (Volcano's `default`, KAI's `default-queue`)."
        ),
    ] = None
    scheduler_name: Annotated[
        ObjectName | None,
        doc(
            "The schedulerName the member pods get, where the scheduler runs under another"
            " name; unset = volcano, kai-scheduler, or the default scheduler for kubernetes."
        ),
    ] = None


class ActorGroupSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A gang of members that start together, admitted whole by a pool's quota."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule="size(self.members) > 0",
            message="spec.members is empty: give at least one member (a name, replicas and a"
            " template)",
        ),
        Validation(
            rule=f"!has(self.scaling) || self.scaling.maxReplicas <= {MAX_INSTANCES}",
            message=f"scaling.maxReplicas counts gang instances: at most {MAX_INSTANCES}",
        ),
    )

    members: Annotated[
        Annotated[
            list[GroupMember],
            msgspec.Meta(max_length=MAX_MEMBERS, extra_json_schema=LIST_MAP_BY_NAME),
        ],
        doc(
            f"The gang's members (at most {MAX_MEMBERS}), started together; the first is the"
            " group's entry, whose queue `scaling` watches."
        ),
    ]
    replicas: Annotated[
        Annotated[int, msgspec.Meta(ge=0, le=MAX_INSTANCES)] | None,
        doc(
            "Gang instances: each is admitted whole or not at all. KEDA sets it through the"
            f" scale subresource when `scaling` is given; unset = scaling.minReplicas, or"
            f" {DEFAULT_INSTANCES} without scaling."
        ),
    ] = None
    scaling: Annotated[
        ActorScaling | None,
        doc(
            "Scale the number of instances (min/maxReplicas) on the entry member's queue depth"
            " with KEDA, as an AsyncActor's replicas; unset = spec.replicas as written."
        ),
    ] = None
    pool: Annotated[
        ObjectName | None,
        doc(
            "ResourcePool whose quota admits the instances, each whole or not at all; unset ="
            " no quota, every instance runs."
        ),
    ] = None
    priority: Annotated[
        int,
        doc(
            "Admission priority within the pool (and its cohort); higher goes first and may"
            " preempt lower as the pool's preemption policy allows (a gang whole)."
        ),
    ] = _ACTOR_DEFAULTS.priority
    readiness_timeout_seconds: Annotated[
        int,
        doc(
            "Seconds an admitted instance has to become fully ready before it is evicted whole,"
            " its quota released, and requeued after a backoff (with a pool only).",
            ge=1,
        ),
    ] = whole_seconds(_READINESS.timeout_s)
    requeuing: Annotated[
        Requeuing,
        doc("The backoff of an instance evicted for not becoming ready in time."),
    ] = msgspec.field(default_factory=lambda: Requeuing())
    scheduling: Annotated[
        GangScheduling | None,
        doc(
            "Who places each admitted instance's pods whole (quota admits it whole; a"
            " gang-aware scheduler then binds all of its pods or none); unset = the operator's"
            " default."
        ),
    ] = None
    broker: Annotated[BrokerRef, doc("The Secret holding the broker's URLs.")] = msgspec.field(
        default_factory=BrokerRef
    )
    keep_queues: Annotated[
        bool,
        doc("Keep the members' queues when the ActorGroup is deleted (default: remove them)."),
    ] = False


class GroupCondition(Condition, frozen=True, kw_only=True, rename="camel"):
    """One aspect of the group's admission, as in metav1.Condition."""

    type: Annotated[
        str,
        doc(
            "Which aspect: Ready, QuotaReserved, Admitted, PodsReady, Preempted, Evicted or"
            " Degraded.",
            max_length=316,
        ),
    ]


class MemberAdmission(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The flavor and replica count one member of an instance was admitted with."""

    name: Annotated[str, doc("The member.")]
    flavor: Annotated[str | None, doc("The ResourceFlavor its quota is taken from.")] = None
    replicas: Annotated[int, doc("Replicas admitted (minReplicas to replicas).", ge=0)]


_DATE_TIME: Final = {"format": "date-time"}


class InstanceStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One gang instance: where it stands in admission and readiness, and the quota it holds."""

    instance: Annotated[int, doc("The instance's index, from 0.", ge=0)]
    phase: Annotated[
        GangPhase,
        doc(
            "Pending (waiting for quota), WaitingForReady (admitted, not every pod ready yet),"
            " Ready, BackingOff (evicted for not becoming ready; requeued at requeueAt) or"
            " Deactivated (evicted past requeuing.backoffLimitCount; see the group's docs)."
        ),
    ] = GangPhase.PENDING
    members: Annotated[
        Annotated[list[MemberAdmission], msgspec.Meta(extra_json_schema=LIST_MAP_BY_NAME)] | None,
        doc("The quota the instance holds: flavor and replicas per member (while admitted)."),
    ] = None
    admitted_at: Annotated[
        str | None, doc("When it was admitted (RFC 3339).", extra_json_schema=_DATE_TIME)
    ] = None
    evictions: Annotated[int, doc("Times it was evicted for not becoming ready.", ge=0)] = 0
    requeue_at: Annotated[
        str | None,
        doc("When a backing-off instance queues again (RFC 3339).", extra_json_schema=_DATE_TIME),
    ] = None
    message: Annotated[str | None, doc("Why it waits or was evicted, in words.")] = None
    preempted_by: Annotated[
        str | None,
        doc(
            "The workload that took its quota (`namespace/name[instance]` of a group), while it"
            " waits to get it back."
        ),
    ] = None


class ActorGroupStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What the operator observed; written by the operator only."""

    replicas: Annotated[
        int | None, doc("Instances holding quota and running (scale subresource).")
    ] = None
    selector: Annotated[
        str | None, doc("Label selector of the group's pods, as a string (for the HPA).")
    ] = None
    desired: Annotated[int | None, doc("Instances asked for (spec.replicas).")] = None
    admitted: Annotated[int | None, doc("Instances holding quota.")] = None
    ready: Annotated[int | None, doc("Instances whose every pod is ready.")] = None
    instances: Annotated[
        Annotated[
            list[InstanceStatus],
            msgspec.Meta(
                extra_json_schema={
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["instance"],
                }
            ),
        ]
        | None,
        doc(
            "Each instance the operator tracks: its phase, the quota it holds, its evictions;"
            " `asya-operator plan` takes an admitted one's quota as held."
        ),
    ] = None
    reactivated: Annotated[
        str | None,
        doc(f"The last `{REACTIVATE_ANNOTATION}` annotation value acted on."),
    ] = None
    observed_generation: Annotated[
        int | None, doc("The spec generation this status describes.")
    ] = None
    conditions: Annotated[
        Annotated[list[GroupCondition], msgspec.Meta(extra_json_schema=LIST_MAP_BY_TYPE)] | None,
        doc(
            "Ready, QuotaReserved, Admitted, PodsReady, Preempted, Evicted and Degraded; and"
            " AcceleratorsUnavailable while an instance waits for its pods on a flavor whose"
            " nodes advertise none of an accelerator a member asks for."
        ),
    ] = None


class ActorGroup(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A gang of actors: members that must run together, admitted whole by a pool's quota.

    Each member is the actor `{group}-{member}`; each admitted instance runs a StatefulSet per
    member, whose pods learn their group, instance, member, rank and size from their
    environment."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule=f"self.metadata.name.matches('{ACTOR_NAME_PATTERN}')",
            message="metadata.name starts each member's actor name: lowercase letters, digits"
            " and '-', starting and ending with a letter or digit (e.g. ddp-train)",
        ),
        Validation(
            rule="self.spec.members.all(m, size(self.metadata.name) + 1 + size(m.name) <="
            f" {MEMBER_ACTOR_NAME_MAX_LENGTH})",
            message="each member runs as the actor {group}-{member}, which must be at most"
            f" {MEMBER_ACTOR_NAME_MAX_LENGTH} characters: shorten the group's or the member's name",
        ),
    )

    api_version: Annotated[str, doc("asya.sh/v1alpha1")] = f"{GROUP}/{VERSION}"
    kind: Annotated[str, doc("ActorGroup")] = "ActorGroup"
    metadata: Annotated[dict[str, Any], doc("Standard object metadata.")] = msgspec.field(
        default_factory=dict
    )
    spec: Annotated[ActorGroupSpec, doc("Members, instances, pool, priority, readiness.")]
    status: Annotated[ActorGroupStatus | None, doc("What the operator observed.")] = None


def member_actor(group: str, member: str) -> str:
    """The actor a member's pods serve (and its queue's last part): `{group}-{member}`."""
    return f"{group}-{member}"


HOLDING: Final = frozenset({GangPhase.WAITING_FOR_READY, GangPhase.READY})
"""Phases in which an instance holds quota and runs its pods."""

MemberHold = tuple[str | None, int]
"""(flavor, replicas) of one member of an admitted gang instance."""


def known_instances(group: ActorGroup) -> dict[int, InstanceStatus]:
    """The instances the group's status records, by index."""
    if group.status is None:
        return {}
    return {i.instance: i for i in group.status.instances or ()}


def held(instance: InstanceStatus) -> dict[str, MemberHold]:
    """The quota an instance holds: member -> (flavor, replicas); empty when it holds none."""
    if instance.phase not in HOLDING:
        return {}
    return {m.name: (m.flavor, m.replicas) for m in instance.members or ()}


def desired_instances(group: ActorGroup) -> int:
    """The gang instances the group asks for: `spec.replicas` (what KEDA or `kubectl scale`
    wrote), held to `scaling`'s bounds; unset, `scaling.minReplicas` (a scaled group starts
    where KEDA would leave it idle), or one without scaling."""
    scaling, wanted = group.spec.scaling, group.spec.replicas
    if scaling is None:
        return DEFAULT_INSTANCES if wanted is None else wanted
    wanted = scaling.min_replicas if wanted is None else wanted
    return max(scaling.min_replicas, min(wanted, scaling.max_replicas))
