"""Accelerators: which resources they are, and keeping their flavors for work that asks for them.

An accelerator is any extended resource (`nvidia.com/gpu`, `amd.com/gpu`, `habana.ai/gaudi`,
...): a resource name with a domain outside `kubernetes.io`, as Kubernetes defines it. A flavor
*offers* accelerators when its quota names one. A pod set that asks for none (none requested,
or only zero) tries a pool's flavors without accelerators first, then those with them, each in
the pool's order, so that CPU work fills GPU nodes only when nothing else has room.

Kueue keeps such nodes apart with a hard rule instead (a ResourceFlavor's `nodeTaints`, which
only pods tolerating them may use); asya prefers, so CPU work still runs when the GPU nodes are
all that is left, and says so: `AcceleratorFallback` records a pod set that asks for no
accelerator but holds quota in a flavor that offers them, and why. Pure; used by `assign` and
`scheduler`.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from asya.admission.model import PodSet, Pool
from asya.admission.quotas import FlavorQuotas, ResourceQuota, quota_milli


class AcceleratorFallbackCause(enum.StrEnum):
    NO_ROOM = "NoRoom"
    """Flavors without accelerators could serve the pod set, but none had room when admitted."""
    RESTRICTED = "Restricted"
    """The pod set may use only flavors that offer accelerators (its `flavors`)."""
    NOT_COVERED = "NotCovered"
    """No flavor of the pool without accelerators has quota for everything it requests."""
    HELD = "Held"
    """It held that quota already when the run began; why it went there is not known."""


@dataclass(frozen=True, slots=True)
class AcceleratorFallback:
    """A pod set that asks for no accelerator, placed on a flavor that offers them."""

    pod_set: str
    flavor: str
    cause: AcceleratorFallbackCause
    message: str
    """For a person: "on h100: no flavor without accelerators (cpu) had room"."""


@functools.cache
def is_accelerator(resource: str) -> bool:
    """Whether `resource` is an extended resource: a domain-prefixed name outside
    `kubernetes.io` (Kubernetes' `IsExtendedResourceName`)."""
    return (
        "/" in resource
        and "kubernetes.io/" not in resource
        and not resource.startswith("requests.")
    )


Potential = Callable[[tuple[str, str]], int]
"""What a pool could take of (flavor, resource) with nothing in use: its own quota and what its
cohort lets it borrow (`QuotaTree.potential_available`)."""


def offers_accelerators(flavor: FlavorQuotas, potential: Potential | None = None) -> bool:
    """Whether the flavor has quota for an accelerator for the pool: with `potential`, some
    accelerator it could get there (its own or borrowed) is above 0; without, its nominal or
    borrowing limit is. A flavor that lists `nvidia.com/gpu` at `nominal: 0` (as Kueue asks of
    every flavor of a resource group) and can borrow none offers none: it is a flavor without
    accelerators."""
    quotas = [quota for quota in flavor.resources if is_accelerator(quota.name)]
    if potential is not None:
        return any(potential((flavor.flavor, quota.name)) > 0 for quota in quotas)
    return any(_has_quota(quota) for quota in quotas)


def _has_quota(quota: ResourceQuota) -> bool:
    nominal, borrowing, _lending = quota_milli(quota)
    return nominal > 0 or (borrowing is not None and borrowing > 0)


def asks_for_accelerators(requests: Mapping[str, int]) -> bool:
    return any(value > 0 and is_accelerator(resource) for resource, value in requests.items())


def in_preferred_order(
    requests: Mapping[str, int], flavors: Sequence[FlavorQuotas], potential: Potential | None = None
) -> Sequence[FlavorQuotas]:
    """`flavors` in the order a pod set with `requests` tries them: for one asking for no
    accelerator, those without accelerators first; each group keeps the given order."""
    if asks_for_accelerators(requests):
        return flavors
    without = [f for f in flavors if not offers_accelerators(f, potential)]
    if not without or len(without) == len(flavors):
        return flavors
    return [*without, *(f for f in flavors if offers_accelerators(f, potential))]


def fallback(
    pod_set: PodSet,
    flavor: str,
    pool: Pool,
    unexplained: AcceleratorFallbackCause,
    potential: Potential | None = None,
) -> AcceleratorFallback | None:
    """The record of `pod_set` placed on `flavor` of `pool`, if it asks for no accelerator and
    the flavor offers them. `unexplained` is the cause when a flavor without accelerators could
    have served it: NO_ROOM for a pod set admitted in this run (the preferred order put those
    first, so none had room), HELD for quota it held when the run began."""
    quotas = next((q for q in pool.quotas if q.flavor == flavor), None)
    if quotas is None or asks_for_accelerators(pod_set.requests):
        return None
    if not offers_accelerators(quotas, potential):
        return None
    covering = [
        q.flavor
        for q in pool.quotas
        if not offers_accelerators(q, potential) and q.covers(pod_set.requests)
    ]
    allowed = [f for f in covering if pod_set.flavors is None or f in pod_set.flavors]
    if not covering:
        cause = AcceleratorFallbackCause.NOT_COVERED
        why = f"pool {pool.name} has no flavor without accelerators"
        if pod_set.requests:  # a pod set that requests nothing is covered by every flavor
            why += f" covering {', '.join(sorted(pod_set.requests))}"
    elif not allowed:
        cause = AcceleratorFallbackCause.RESTRICTED
        why = f"pod set {pod_set.name} may use only flavor {', '.join(pod_set.flavors or ())}"
    else:
        cause = unexplained
        why = {
            AcceleratorFallbackCause.NO_ROOM: (
                f"no flavor without accelerators ({', '.join(allowed)}) had room"
            ),
            AcceleratorFallbackCause.HELD: "admitted there earlier",
        }[unexplained]
    return AcceleratorFallback(pod_set.name, flavor, cause, f"on {flavor}: {why}")
