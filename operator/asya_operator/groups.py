"""The ActorGroup custom resource: members that must run together, as they travel the API.

An ActorGroup is a gang: its members (actor templates with replica counts) are admitted
together, whole, or not at all; `spec.replicas` is the number of gang instances, which KEDA
may drive through the scale subresource. The member's template reuses the AsyncActor's
sub-structs (resources, env, broker), and defaults are asya's (`ActorSpec`'s priority,
`ReadinessPolicy`'s timeout), never retyped. `asya_operator.crds` builds the CRD from these
Structs; `asya_operator.scenario` turns each instance into an admission workload.

The controller does not act on ActorGroups yet (it makes no pods for them): today they feed
`asya-operator plan`'s offline admission what-if, and their descriptions say so.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, ClassVar, Final

import msgspec

from asya.actor import ActorSpec
from asya.admission.readiness import ReadinessPolicy
from asya_operator.pools import NOT_YET_APPLIED, WRITTEN_BY_THE_OPERATOR
from asya_operator.resources import (
    GROUP,
    HANDLER_PATTERN,
    LIST_MAP_BY_NAME,
    LIST_MAP_BY_TYPE,
    VERSION,
    ActorResources,
    BrokerRef,
    Condition,
    EnvVar,
    ObjectName,
    Validation,
    doc,
    whole_seconds,
)

DEFAULT_INSTANCES: Final = 1
"""Gang instances of an ActorGroup that leaves `spec.replicas` out."""

MAX_MEMBERS: Final = 8
"""Most members a group has: Kueue's limit on a workload's pod sets."""

MEMBER_NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A member's name: a DNS label, as it becomes part of its pods' names."""

_ACTOR_SPEC_DEFAULTS: Final = {
    f.name: f.default for f in dataclasses.fields(ActorSpec) if f.default is not dataclasses.MISSING
}
_READINESS: Final = ReadinessPolicy()


class MemberTemplate(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The actor each replica of a member runs: image, handler, environment, what it asks for."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule="size(self.image) > 0",
            message="template.image is empty: set the container image holding the handler's code",
        ),
        Validation(
            rule=f"self.handler.matches('{HANDLER_PATTERN}')",
            message="template.handler must look like module:attr (a dotted module, a colon, the"
            " function or class), e.g. my_app.train:worker",
        ),
    )

    image: Annotated[
        str,
        doc("Container image with the handler's code and asya installed.", max_length=1024),
    ]
    handler: Annotated[
        str,
        doc("The member's handler as `module:attr` (the runtime's ASYA_HANDLER).", max_length=512),
    ]
    env: Annotated[
        Annotated[list[EnvVar], msgspec.Meta(extra_json_schema=LIST_MAP_BY_NAME)] | None,
        doc("Extra environment variables of the runtime container."),
    ] = None
    resources: Annotated[ActorResources, doc("What one replica asks the cluster for.")] = (
        msgspec.field(default_factory=ActorResources)
    )
    flavor: Annotated[
        ObjectName | None,
        doc("ResourceFlavor whose node labels and tolerations the pods get; unset = none."),
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


class ActorGroupSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A gang of members that start together, admitted whole by a pool's quota."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule="size(self.members) > 0",
            message="spec.members is empty: give at least one member (a name, replicas and a"
            " template)",
        ),
    )

    members: Annotated[
        Annotated[
            list[GroupMember],
            msgspec.Meta(max_length=MAX_MEMBERS, extra_json_schema=LIST_MAP_BY_NAME),
        ],
        doc(f"The gang's members (at most {MAX_MEMBERS}), started together." + NOT_YET_APPLIED),
    ]
    replicas: Annotated[
        int,
        doc(
            "Gang instances: each is admitted whole or not at all. KEDA may set it through the"
            " scale subresource." + NOT_YET_APPLIED,
            ge=0,
        ),
    ] = DEFAULT_INSTANCES
    pool: Annotated[
        ObjectName | None,
        doc("ResourcePool whose quota admits the instances; unset = none." + NOT_YET_APPLIED),
    ] = None
    priority: Annotated[
        int, doc("Admission priority within the pool; higher goes first." + NOT_YET_APPLIED)
    ] = _ACTOR_SPEC_DEFAULTS["priority"]
    readiness_timeout_seconds: Annotated[
        int,
        doc(
            "Seconds an admitted instance has to become fully ready before it is evicted whole"
            " and requeued with backoff." + NOT_YET_APPLIED,
            ge=1,
        ),
    ] = whole_seconds(_READINESS.timeout_s)
    broker: Annotated[BrokerRef, doc("The Secret holding the broker's URLs.")] = msgspec.field(
        default_factory=BrokerRef
    )


class GroupCondition(Condition, frozen=True, kw_only=True, rename="camel"):
    """One aspect of the group's admission, as in metav1.Condition."""

    type: Annotated[
        str,
        doc("Which aspect: QuotaReserved, Admitted, PodsReady or Evicted.", max_length=316),
    ]


class MemberAdmission(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The flavor and replica count one member of an instance was admitted with."""

    name: Annotated[str, doc("The member.")]
    flavor: Annotated[str, doc("The ResourceFlavor its quota is taken from.")]
    replicas: Annotated[int, doc("Replicas admitted (minReplicas to replicas).", ge=0)]


class InstanceAdmission(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The quota one gang instance holds."""

    instance: Annotated[int, doc("The instance's index, from 0.", ge=0)]
    members: Annotated[
        Annotated[list[MemberAdmission], msgspec.Meta(extra_json_schema=LIST_MAP_BY_NAME)],
        doc("Flavor and replicas per member."),
    ]


class ActorGroupStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What the operator observed."""

    replicas: Annotated[
        int | None, doc("Instances running (scale subresource)." + WRITTEN_BY_THE_OPERATOR)
    ] = None
    selector: Annotated[
        str | None,
        doc(
            "Label selector of the group's pods, as a string (for the HPA)."
            + WRITTEN_BY_THE_OPERATOR
        ),
    ] = None
    desired: Annotated[
        int | None, doc("Instances asked for (spec.replicas)." + WRITTEN_BY_THE_OPERATOR)
    ] = None
    admitted: Annotated[int | None, doc("Instances holding quota." + WRITTEN_BY_THE_OPERATOR)] = (
        None
    )
    ready: Annotated[
        int | None, doc("Instances whose every replica is ready." + WRITTEN_BY_THE_OPERATOR)
    ] = None
    admission: Annotated[
        Annotated[
            list[InstanceAdmission],
            msgspec.Meta(
                extra_json_schema={
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["instance"],
                }
            ),
        ]
        | None,
        doc(
            "The quota each admitted instance holds; `asya-operator plan` takes it as already"
            " admitted." + WRITTEN_BY_THE_OPERATOR
        ),
    ] = None
    observed_generation: Annotated[
        int | None, doc("The spec generation this status describes.")
    ] = None
    conditions: Annotated[
        Annotated[list[GroupCondition], msgspec.Meta(extra_json_schema=LIST_MAP_BY_TYPE)] | None,
        doc("QuotaReserved, Admitted, PodsReady and Evicted." + WRITTEN_BY_THE_OPERATOR),
    ] = None


class ActorGroup(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A gang of actors: members that must run together, admitted whole by a pool's quota.

    Not yet applied by the controller (it makes no pods for it): `asya-operator plan` reads it."""

    api_version: Annotated[str, doc("asya.sh/v1alpha1")] = f"{GROUP}/{VERSION}"
    kind: Annotated[str, doc("ActorGroup")] = "ActorGroup"
    metadata: Annotated[dict[str, Any], doc("Standard object metadata.")] = msgspec.field(
        default_factory=dict
    )
    spec: Annotated[ActorGroupSpec, doc("Members, instances, pool, priority, readiness.")]
    status: Annotated[ActorGroupStatus | None, doc("What the operator observed.")] = None
