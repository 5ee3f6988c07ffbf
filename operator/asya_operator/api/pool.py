"""The custom resources of admission quota: ResourcePool and Cohort, as they travel the API.

Their vocabulary is the admission scenario's (`asya.admission.model`: a pool is Kueue's
ClusterQueue, a cohort Kueue's Cohort), so a pool written as a CR reads as the same pool in a
scenario file; `asya_operator.plans.whatif` turns one into the other. Defaults are the engine's,
read from `asya.admission.model`, never retyped. `asya_operator.api.crds` builds the CRDs from
these Structs. Field names are camelCase on the wire.

The controller's admission pass (`asya_operator.reconcile.admission`) admits AsyncActors' replicas
and ActorGroups' gang instances by them and writes each pool's status; `asya-operator plan`
runs the same engine on them offline. A Cohort's status is not written yet (its field says so).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal

import msgspec

from asya.admission.model import (
    BorrowPolicy,
    BorrowWithinCohort,
    Pool,
    Preemption,
    QueueingStrategy,
    ReclaimWithinCohort,
    WithinPool,
)
from asya_operator.api.template import (
    GROUP,
    LIST_MAP_BY_NAME,
    QUANTITY_PATTERN,
    VERSION,
    ObjectName,
    Validation,
    doc,
)

_WRITTEN_PER_WORKLOAD: Final = (
    " Written by the operator after each admission pass; a workload is one replica of an"
    " AsyncActor or one gang instance of an ActorGroup."
)
WRITTEN_BY_THE_OPERATOR: Final = " Written by the operator (not yet: a later controller does)."
"""Said of every status field no controller writes yet."""

NON_NEGATIVE_QUANTITY_PATTERN: Final = QUANTITY_PATTERN.replace(r"^(\+|-)?", r"^\+?", 1)
"""A Kubernetes quantity without a minus sign: quota is never negative."""

RESOURCE_NAME_PATTERN: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
"""A resource name as a container's requests have it: `cpu`, `memory`, `nvidia.com/gpu`."""

_POOL: Final = {f.name: f.default for f in msgspec.structs.fields(Pool)}
_PREEMPTION: Final = Preemption()
_BORROW: Final = BorrowWithinCohort()


_Quota = (
    Annotated[str, msgspec.Meta(pattern=NON_NEGATIVE_QUANTITY_PATTERN)]
    | Annotated[int, msgspec.Meta(ge=0)]
)
_LIST_MAP_BY_FLAVOR: Final = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["flavor"],
}


# --- Quotas ------------------------------------------------------------------------------


class ResourceQuota(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Quota of one resource in one flavor: what is the pool's own, what it may borrow, lend."""

    # The schema's pattern keeps a string quantity from being negative; an integer is checked
    # here, as an int-or-string schema cannot bound its integer branch.
    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule="(type(self.nominal) != int || self.nominal >= 0)"
            " && (!has(self.borrowingLimit) || type(self.borrowingLimit) != int"
            " || self.borrowingLimit >= 0)"
            " && (!has(self.lendingLimit) || type(self.lendingLimit) != int"
            " || self.lendingLimit >= 0)",
            message="quota is never negative: give nominal, borrowingLimit and lendingLimit as"
            " 0 or more",
        ),
    )

    name: Annotated[
        str,
        doc(
            "The resource, as pods request it: cpu, memory, nvidia.com/gpu, ...",
            max_length=253,
            pattern=RESOURCE_NAME_PATTERN,
        ),
    ]
    nominal: Annotated[_Quota, doc("The quota that is this node's own, a Kubernetes quantity.")]
    borrowing_limit: Annotated[
        _Quota | None,
        doc("Most this node may take from its cohort beyond its nominal quota; unset = no limit."),
    ] = None
    lending_limit: Annotated[
        _Quota | None,
        doc("Most of its unused nominal quota this node lends to its cohort; unset = all of it."),
    ] = None


class FlavorQuotas(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The quotas a node has in one ResourceFlavor."""

    flavor: Annotated[ObjectName, doc("A ResourceFlavor's name.")]
    resources: Annotated[
        Annotated[
            list[ResourceQuota], msgspec.Meta(max_length=16, extra_json_schema=LIST_MAP_BY_NAME)
        ],
        doc("One quota per resource (cpu, memory, nvidia.com/gpu, ...)."),
    ]


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


class BorrowPolicyOverCohort(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Whether a workload may preempt in the cohort while its pool borrows."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule=f"self.policy != '{BorrowPolicy.NEVER.value}' || !has(self.maxPriorityThreshold)",
            message="borrowWithinCohort.maxPriorityThreshold applies only with policy"
            " LowerPriority: set the policy or remove the threshold",
        ),
    )

    policy: Annotated[
        BorrowPolicy, doc("Never, or LowerPriority: preempt lower-priority workloads.")
    ] = _BORROW.policy
    max_priority_threshold: Annotated[
        int | None,
        doc("Only workloads at or below this priority may be preempted; unset = any lower."),
    ] = _BORROW.max_priority_threshold


class PoolPreemption(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """When a pending workload of this pool may evict admitted ones (Kueue's preemption)."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule=f"self.reclaimWithinCohort != '{ReclaimWithinCohort.NEVER.value}'"
            f" || self.borrowWithinCohort.policy == '{BorrowPolicy.NEVER.value}'",
            message="preemption.borrowWithinCohort needs reclaimWithinCohort other than Never"
            " (as in Kueue): set reclaimWithinCohort, or borrowWithinCohort.policy: Never",
        ),
    )

    within_pool: Annotated[
        WithinPool,
        doc(
            "Never, LowerPriority, or LowerOrNewerEqualPriority: which workloads of this pool"
            " a pending one may evict."
        ),
    ] = _PREEMPTION.within_pool
    reclaim_within_cohort: Annotated[
        ReclaimWithinCohort,
        doc(
            "Never, LowerPriority or Any: which workloads of other pools in the cohort, using"
            " quota they borrowed, a pending one may evict to take its quota back."
        ),
    ] = _PREEMPTION.reclaim_within_cohort
    borrow_within_cohort: Annotated[
        BorrowPolicyOverCohort, doc("Whether preempting is allowed while borrowing.")
    ] = msgspec.field(default_factory=BorrowPolicyOverCohort)


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
        PoolPreemption,
        doc("When pending workloads may evict admitted ones."),
    ] = msgspec.field(default_factory=PoolPreemption)
    quotas: Annotated[
        _QuotaList | None,
        doc("Quota per flavor, in the order flavors are tried for a workload."),
    ] = None


class ResourceUsage(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """How much of one resource in one flavor the pool's admitted workloads use."""

    name: Annotated[str, doc("The resource (cpu, memory, nvidia.com/gpu, ...).")]
    usage: Annotated[_Quota, doc("What admitted workloads request in total.")] = 0
    borrowed: Annotated[_Quota, doc("The part of usage above the nominal quota.")] = 0
    lent: Annotated[_Quota, doc("Unused nominal quota other pools of the cohort use.")] = 0


class FlavorUsage(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Usage in one flavor."""

    flavor: Annotated[str, doc("A ResourceFlavor's name.")]
    resources: Annotated[
        Annotated[list[ResourceUsage], msgspec.Meta(extra_json_schema=LIST_MAP_BY_NAME)],
        doc("Usage per resource."),
    ]


class ResourcePoolStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What admission observed for this pool."""

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
        doc("Usage of the cohort's subtree per flavor and resource." + WRITTEN_BY_THE_OPERATOR),
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
