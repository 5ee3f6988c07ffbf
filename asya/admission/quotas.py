"""The quota vocabulary, defined once: what a pool or cohort has per flavor and resource, and
when its pending work may preempt.

These types are both the engine's and the API's: the operator's ResourcePool and Cohort decode
their `spec.quotas` and `spec.preemption` into them, and its CRDs are generated from them, so
their field descriptions, limits and the API server's rules across fields (`VALIDATIONS`, CEL
rules as data) live here, and a quota is kept as written (`8`, `"500m"`, `"64Gi"`), as a CR has
it; the engine reads it in milli-units (`quota_milli`). Nothing here imports Kubernetes or the
operator. `model` builds pools and cohorts of them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Annotated, ClassVar, Final, TypeAlias

import msgspec

from asya.admission.quantity import NON_NEGATIVE_QUANTITY_PATTERN, Milli, parse_quantity


class WithinPool(enum.StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class ReclaimWithinCohort(enum.StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class BorrowPolicy(enum.StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class Wire(
    msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True, gc=False
):
    """The base of every scenario type: camelCase on the wire, unknown fields refused."""

    # gc=False: scenario values are immutable trees that never form reference cycles, so the
    # garbage collector need not scan them (it matters with tens of thousands of workloads).


class ApiRule(msgspec.Struct, frozen=True, kw_only=True):
    """A rule across fields that the API server checks on a custom resource using this type
    (CEL, `x-kubernetes-validations`). Data only: asya_operator generates the CRDs from it."""

    rule: str
    """A CEL expression that is true for a valid object (`self` is the object)."""
    message: str
    """What the API server answers when the rule is false: what is wrong and how to fix it."""


class BorrowWithinCohort(Wire, frozen=True, kw_only=True):
    """Whether a workload may preempt in the cohort while its pool borrows."""

    VALIDATIONS: ClassVar[tuple[ApiRule, ...]] = (
        ApiRule(
            rule=f"self.policy != '{BorrowPolicy.NEVER.value}' || !has(self.maxPriorityThreshold)",
            message="borrowWithinCohort.maxPriorityThreshold applies only with policy"
            " LowerPriority: set the policy or remove the threshold",
        ),
    )

    policy: Annotated[
        BorrowPolicy,
        msgspec.Meta(description="Never, or LowerPriority: preempt lower-priority workloads."),
    ] = BorrowPolicy.NEVER
    max_priority_threshold: Annotated[
        int | None,
        msgspec.Meta(
            description="Only workloads at or below this priority may be preempted; unset ="
            " any lower."
        ),
    ] = None


class Preemption(Wire, frozen=True, kw_only=True):
    """When a pending workload of this pool may evict admitted ones (Kueue's preemption)."""

    VALIDATIONS: ClassVar[tuple[ApiRule, ...]] = (
        ApiRule(
            rule=f"self.reclaimWithinCohort != '{ReclaimWithinCohort.NEVER.value}'"
            f" || self.borrowWithinCohort.policy == '{BorrowPolicy.NEVER.value}'",
            message="preemption.borrowWithinCohort needs reclaimWithinCohort other than Never"
            " (as in Kueue): set reclaimWithinCohort, or borrowWithinCohort.policy: Never",
        ),
    )

    within_pool: Annotated[
        WithinPool,
        msgspec.Meta(
            description="Never, LowerPriority, or LowerOrNewerEqualPriority: which workloads of"
            " this pool a pending one may evict."
        ),
    ] = WithinPool.NEVER
    reclaim_within_cohort: Annotated[
        ReclaimWithinCohort,
        msgspec.Meta(
            description="Never, LowerPriority or Any: which workloads of other pools in the"
            " cohort, using quota they borrowed, a pending one may evict to take its quota back."
        ),
    ] = ReclaimWithinCohort.NEVER
    borrow_within_cohort: Annotated[
        BorrowWithinCohort,
        msgspec.Meta(description="Whether preempting is allowed while borrowing."),
    ] = msgspec.field(default_factory=BorrowWithinCohort)


RESOURCE_NAME_PATTERN: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
"""A resource name as a container's requests have it: `cpu`, `memory`, `nvidia.com/gpu`."""

FLAVOR_NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
"""A flavor's name: a ResourceFlavor's, so an object name (DNS-1123 subdomain)."""

Quantity: TypeAlias = (
    Annotated[str, msgspec.Meta(pattern=NON_NEGATIVE_QUANTITY_PATTERN)]
    | Annotated[int, msgspec.Meta(ge=0)]
)
"""A quota as written (`8`, `"500m"`, `"64Gi"`): never negative. `check_scenario` parses it
(`quantity.parse_quantity`); the engine counts in milli-units."""

_LIST_MAP_BY_NAME: Final = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}
# Items are merged by name when applied (server-side apply), and a name appears once.


class ResourceQuota(Wire, frozen=True, kw_only=True):
    """Quota of one resource in one flavor: what is the pool's own, what it may borrow, lend."""

    # The schema's pattern keeps a string quantity from being negative; an integer is checked
    # here, as an int-or-string schema cannot bound its integer branch.
    VALIDATIONS: ClassVar[tuple[ApiRule, ...]] = (
        ApiRule(
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
        msgspec.Meta(
            description="The resource, as pods request it: cpu, memory, nvidia.com/gpu, ...",
            max_length=253,
            pattern=RESOURCE_NAME_PATTERN,
        ),
    ]
    nominal: Annotated[
        Quantity,
        msgspec.Meta(description="The quota that is this node's own, a Kubernetes quantity."),
    ]
    borrowing_limit: Annotated[
        Quantity | None,
        msgspec.Meta(
            description="Most this node may take from its cohort beyond its nominal quota;"
            " unset = no limit."
        ),
    ] = None
    lending_limit: Annotated[
        Quantity | None,
        msgspec.Meta(
            description="Most of its unused nominal quota this node lends to its cohort; unset ="
            " all of it."
        ),
    ] = None


class FlavorQuotas(Wire, frozen=True, kw_only=True):
    """The quotas a node has in one ResourceFlavor."""

    flavor: Annotated[
        Annotated[str, msgspec.Meta(max_length=253, pattern=FLAVOR_NAME_PATTERN)],
        msgspec.Meta(description="A ResourceFlavor's name."),
    ]
    resources: Annotated[
        Annotated[
            tuple[ResourceQuota, ...],
            msgspec.Meta(max_length=16, extra_json_schema=_LIST_MAP_BY_NAME),
        ],
        msgspec.Meta(description="One quota per resource (cpu, memory, nvidia.com/gpu, ...)."),
    ]

    def quota(self, resource: str) -> ResourceQuota | None:
        """The quota of `resource` in this flavor; None: the flavor has none for it."""
        return next((q for q in self.resources if q.name == resource), None)

    def covers(self, requests: Iterable[str]) -> bool:
        """Whether this flavor has quota for every one of `requests` (resource names)."""
        names = {q.name for q in self.resources}
        return all(r in names for r in requests)


def quota_milli(quota: ResourceQuota) -> tuple[Milli, Milli | None, Milli | None]:
    """(nominal, borrowing limit, lending limit) of `quota` in milli-units.

    Raises:
        AdmissionError: one is not a quantity (`check_scenario` has checked a scenario's).
    """
    borrowing, lending = quota.borrowing_limit, quota.lending_limit
    return (
        parse_quantity(quota.nominal),
        None if borrowing is None else parse_quantity(borrowing),
        None if lending is None else parse_quantity(lending),
    )
