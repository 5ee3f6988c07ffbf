"""The custom resources of admission quota: ResourcePool and Cohort, as they travel the API.

Their quota vocabulary IS the admission engine's: `spec.quotas` (`FlavorQuotas`,
`ResourceQuota`) and `spec.preemption` (`Preemption`, `BorrowWithinCohort`) are the very types
of `asya.admission.model`, defined there once with their descriptions and CEL rules, so a
pool's quota reaches the engine as it was decoded, not copied (`asya_operator.plans.quota`
makes the engine's Pool and Cohort of them). What is the API's own stays here: object
metadata, the namespaceSelector (the engine takes the namespaces it selects), and status.
Defaults are the engine's, read from `asya.admission.model`, never retyped.
`asya_operator.api.crds` builds the CRDs from these Structs. Field names are camelCase on the
wire.

The controller's admission pass (`asya_operator.reconcile.admission`) admits AsyncActors' replicas
and ActorGroups' gang instances by them and writes each pool's and each Cohort's status;
`asya-operator plan` runs the same engine on them offline.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal

import msgspec

from asya.admission.model import Pool, QueueingStrategy
from asya.admission.quotas import FlavorQuotas, Preemption, Quantity
from asya_operator.api.template import (
    GROUP,
    LIST_MAP_BY_NAME,
    LIST_MAP_BY_TYPE,
    VERSION,
    Condition,
    ObjectName,
    Validation,
    doc,
)

_WRITTEN_PER_WORKLOAD: Final = (
    " Written by the operator after each admission pass; a workload is one replica of an"
    " AsyncActor or one gang instance of an ActorGroup."
)

_POOL: Final = {f.name: f.default for f in msgspec.structs.fields(Pool)}

_LIST_MAP_BY_FLAVOR: Final = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["flavor"],
}
_QuotaList = Annotated[
    list[FlavorQuotas], msgspec.Meta(max_length=16, extra_json_schema=_LIST_MAP_BY_FLAVOR)
]


# --- ResourcePool ------------------------------------------------------------------------


class LabelSelectorRequirement(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One requirement on a namespace's labels (metav1.LabelSelectorRequirement)."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule="!(self.operator in ['In', 'NotIn'])"
            " || (has(self.values) && size(self.values) > 0)",
            message="operators In and NotIn compare against values: give at least one value",
        ),
        Validation(
            rule="!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values)"
            " || size(self.values) == 0",
            message="operators Exists and DoesNotExist look at the key only: remove values",
        ),
    )

    key: Annotated[str, doc("The label key.", min_length=1, max_length=317)]
    operator: Annotated[
        Literal["In", "NotIn", "Exists", "DoesNotExist"],
        doc("In, NotIn, Exists or DoesNotExist."),
    ]
    values: Annotated[list[str] | None, doc("Values compared with In and NotIn.")] = None


class NamespaceSelector(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Which namespaces' workloads may use the pool (metav1.LabelSelector; `{}` = all).

    Every namespace carries `kubernetes.io/metadata.name`, so a list of namespaces is the
    requirement `{key: kubernetes.io/metadata.name, operator: In, values: [...]}`."""

    match_labels: Annotated[
        dict[str, str] | None, doc("Labels a namespace must have, each with this value.")
    ] = None
    match_expressions: Annotated[
        list[LabelSelectorRequirement] | None, doc("Requirements a namespace must meet, all.")
    ] = None


class ResourcePoolSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A team's quota: per flavor and resource, what is its own, and how it shares it."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule="has(self.cohort) || !has(self.quotas) || self.quotas.all(q, q.resources.all("
            "r, !has(r.borrowingLimit) && !has(r.lendingLimit)))",
            message="borrowingLimit and lendingLimit apply within a cohort: set spec.cohort, or"
            " remove them",
        ),
    )

    cohort: Annotated[
        ObjectName | None,
        doc(
            "The cohort whose members lend each other unused quota; unset = none. A Cohort"
            " object of that name is optional (it adds a parent or quota of its own)."
        ),
    ] = _POOL["cohort"]
    namespace_selector: Annotated[
        NamespaceSelector | None,
        doc("Namespaces whose workloads may use this pool; unset or `{}` = every namespace."),
    ] = None
    queueing_strategy: Annotated[
        QueueingStrategy,
        doc(
            "StrictFIFO: a head that does not fit blocks the pool. BestEffortFIFO: it steps"
            " aside until quota is released."
        ),
    ] = _POOL["queueing_strategy"]
    preemption: Annotated[
        Preemption,
        doc("When pending workloads may evict admitted ones."),
    ] = msgspec.field(default_factory=Preemption)
    quotas: Annotated[
        _QuotaList | None,
        doc("Quota per flavor, in the order flavors are tried for a workload."),
    ] = None


class ResourceUsage(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """How much of one resource in one flavor the pool's admitted workloads use."""

    name: Annotated[str, doc("The resource (cpu, memory, nvidia.com/gpu, ...).")]
    usage: Annotated[Quantity, doc("What admitted workloads request in total.")] = 0
    borrowed: Annotated[Quantity, doc("The part of usage above the nominal quota.")] = 0
    lent: Annotated[Quantity, doc("Unused nominal quota other pools of the cohort use.")] = 0


class FlavorUsage(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Usage in one flavor."""

    flavor: Annotated[str, doc("A ResourceFlavor's name.")]
    resources: Annotated[
        Annotated[list[ResourceUsage], msgspec.Meta(extra_json_schema=LIST_MAP_BY_NAME)],
        doc("Usage per resource."),
    ]


class PoolCondition(Condition, frozen=True, kw_only=True, rename="camel"):
    """One aspect of the pool, as in metav1.Condition."""

    type: Annotated[str, doc("Which aspect: Active.", max_length=316)]


class ResourcePoolStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What admission observed for this pool."""

    conditions: Annotated[
        Annotated[list[PoolCondition], msgspec.Meta(extra_json_schema=LIST_MAP_BY_TYPE)] | None,
        doc(
            "Active: True when every flavor the pool's quotas name exists and its quotas and"
            " cohort tree are valid; False with the reason (as Kueue's ClusterQueue Active)."
            " Written by the operator after each admission pass."
        ),
    ] = None

    flavors_usage: Annotated[
        Annotated[list[FlavorUsage], msgspec.Meta(extra_json_schema=_LIST_MAP_BY_FLAVOR)] | None,
        doc("Usage, borrowed and lent quota per flavor and resource." + _WRITTEN_PER_WORKLOAD),
    ] = None
    admitted_workloads: Annotated[
        int | None, doc("Workloads holding quota in this pool." + _WRITTEN_PER_WORKLOAD)
    ] = None
    pending_workloads: Annotated[
        int | None, doc("Workloads waiting for quota in this pool." + _WRITTEN_PER_WORKLOAD)
    ] = None
    observed_generation: Annotated[
        int | None, doc("The spec generation this status describes.")
    ] = None


class ResourcePool(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A cluster-wide quota that admits AsyncActors' replicas and ActorGroups' gangs.

    Kueue's ClusterQueue. The controller admits AsyncActors' replicas by it; ActorGroups are
    not run yet (`asya-operator plan` shows what it would decide for them)."""

    api_version: Annotated[str, doc("asya.sh/v1alpha1")] = f"{GROUP}/{VERSION}"
    kind: Annotated[str, doc("ResourcePool")] = "ResourcePool"
    metadata: Annotated[dict[str, Any], doc("Standard object metadata.")] = msgspec.field(
        default_factory=dict
    )
    spec: Annotated[ResourcePoolSpec, doc("Quota, cohort, namespaces, queueing, preemption.")]
    status: Annotated[ResourcePoolStatus | None, doc("What admission observed.")] = None


# --- Cohort ------------------------------------------------------------------------------


class CohortSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Where the cohort sits in the cohort tree, and quota of its own."""

    parent: Annotated[
        ObjectName | None,
        doc("The cohort this one belongs to; its members then share with the parent's."),
    ] = None
    quotas: Annotated[
        _QuotaList | None,
        doc("Quota the cohort owns, lent to its members (same shape as a pool's)."),
    ] = None


class CohortStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What admission observed for this cohort."""

    flavors_usage: Annotated[
        Annotated[list[FlavorUsage], msgspec.Meta(extra_json_schema=_LIST_MAP_BY_FLAVOR)] | None,
        doc(
            "Usage of the cohort's subtree (its pools' and cohorts' below it) per flavor and"
            " resource: usage, borrowed from its parent (beyond what the subtree has there), and"
            " lent to its parent's other members. Written by the operator after each admission"
            " pass."
        ),
    ] = None


class Cohort(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A cluster-wide group of ResourcePools and cohorts that lend each other unused quota.

    A pool may name a cohort no Cohort object defines; the object adds a parent or quota.
    The controller admits AsyncActors' replicas and ActorGroups' instances by it."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule="!has(self.spec.parent) || self.spec.parent != self.metadata.name",
            message="spec.parent names this cohort itself: name another cohort, or remove it",
        ),
    )

    api_version: Annotated[str, doc("asya.sh/v1alpha1")] = f"{GROUP}/{VERSION}"
    kind: Annotated[str, doc("Cohort")] = "Cohort"
    metadata: Annotated[dict[str, Any], doc("Standard object metadata.")] = msgspec.field(
        default_factory=dict
    )
    spec: Annotated[CohortSpec, doc("Parent and quota.")] = msgspec.field(
        default_factory=CohortSpec
    )
    status: Annotated[CohortStatus | None, doc("What admission observed.")] = None
