"""A ResourcePool's status from an admission pass: usage, borrowed and lent per flavor.

Pure: the pools, the pooled actors and what the pass decided in; one `status` per pool out.
- usage: what the admitted replicas of the pool's actors and the admitted instances of its
  ActorGroups request, per flavor and resource;
- borrowed: the part of usage above the pool's nominal quota (taken from its cohort);
- lent: the part of the pool's unused nominal quota that the other members of its cohort
  (pools, and cohorts below it) use above their own. What they use above their own is counted
  first against the quota the Cohort object owns, then against its members' unused quota in
  the cohort's order, pools first (the engine does not say whose unused quota it used;
  `quota.Lending`).
- admittedWorkloads / pendingWorkloads: workloads holding quota / waiting for it, a workload
  being an actor's replica or a gang instance;
- the `Active` condition, as Kueue's ClusterQueue has it: True (reason Ready) when the pool's
  quotas are valid, every flavor they name exists as a ResourceFlavor, and the cohorts can be
  read (a loop in the Cohorts' parents stops every admission pass); else False with the first
  problem's reason, every problem named in the message. A cohort a pool names needs no Cohort
  object (as in Kueue, the name alone makes one), so a missing one is no problem.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import msgspec

from asya import typeinfo
from asya.admission import model
from asya.admission.quantity import format_quantity
from asya.errors import AdmissionError
from asya_operator.api.pool import Cohort, PoolCondition, ResourcePool, ResourcePoolStatus
from asya_operator.api.template import ActorResources
from asya_operator.plans.conditions import Problem, Reason, conditions_at, generation_of
from asya_operator.plans.quota import Lending, cohort_of, pool_of, requests_of
from asya_operator.plans.statuses import StatusPatch
from asya_operator.plans.workloads import Decisions, PooledActor, PooledGroup

_PASS_OWNS: Final = (
    "flavors_usage",
    "admitted_workloads",
    "pending_workloads",
    "conditions",
    "observed_generation",
)
"""What an admission pass writes of a pool's status: all of it."""

_Usage = dict[tuple[str, str], int]
"""(flavor, resource) -> milli-units."""


@dataclass(frozen=True)
class PoolUsage:
    """What a pass admitted, per pool (by name)."""

    usage: dict[str, _Usage]
    """What the admitted workloads request, per flavor and resource."""
    admitted: dict[str, int]
    """Workloads holding quota."""
    pending: dict[str, int]
    """Workloads waiting for it."""


def pool_usage(
    pools: Sequence[ResourcePool],
    actors: Sequence[PooledActor],
    groups: Sequence[PooledGroup],
    decided: Decisions,
) -> PoolUsage:
    """What the pass that decided `decided` admitted in each of `pools`."""
    usage: dict[str, _Usage] = {_name(p): defaultdict(int) for p in pools}
    admitted: dict[str, int] = defaultdict(int)
    pending: dict[str, int] = defaultdict(int)
    for actor in actors:
        admission = decided.actors.get((actor.namespace, actor.name))
        if admission is None or actor.pool not in usage:
            continue
        admitted[actor.pool] += admission.admitted
        pending[actor.pool] += actor.desired - admission.admitted
        if admission.flavor is None or admission.admitted == 0:
            continue
        for resource, per_replica in _requests(actor.resources).items():
            usage[actor.pool][admission.flavor, resource] += per_replica * admission.admitted
    for group in groups:
        instances = decided.groups.get((group.namespace, group.name), {})
        if group.pool not in usage:
            continue
        requests = {m.name: _requests(m.resources) for m in group.members}
        for instance in instances.values():
            if instance.members is None:
                pending[group.pool] += 1
                continue
            admitted[group.pool] += 1
            for member, (flavor, count) in instance.members.items():
                for resource, per_replica in requests.get(member, {}).items():
                    usage[group.pool][str(flavor), resource] += per_replica * count
    return PoolUsage(usage, admitted, pending)


def plan_pool_statuses(
    pools: Sequence[ResourcePool], used: PoolUsage, found: Lending
) -> dict[str, dict[str, Any]]:
    """The `status` of each pool (by name) after a pass that admitted `used` (`pool_usage`),
    with what each borrowed and lent (`found`: `quota.lending` of that usage)."""
    return {
        _name(pool): {
            "flavorsUsage": _flavors_usage(pool, used.usage[_name(pool)], found),
            "admittedWorkloads": used.admitted[_name(pool)],
            "pendingWorkloads": used.pending[_name(pool)],
        }
        for pool in pools
    }


def _name(pool: ResourcePool) -> str:
    return str(pool.metadata["name"])


def _requests(resources: ActorResources) -> dict[str, int]:
    try:
        return dict(requests_of(resources))
    except AdmissionError:
        return {}  # the pass admitted none of it: nothing to count


def _flavors_usage(pool: ResourcePool, used: _Usage, found: Lending) -> list[dict[str, Any]]:
    # A pool whose quotas cannot be read is not in `found`: nothing borrowed or lent is known.
    borrowed = found.borrowed.get(("pool", _name(pool)), {})
    lent = found.lent.get(("pool", _name(pool)), {})
    out = []
    for flavor in pool.spec.quotas or ():
        resources = [
            {
                "name": quota.name,
                "usage": format_quantity(used.get((flavor.flavor, quota.name), 0)),
                "borrowed": format_quantity(borrowed.get((flavor.flavor, quota.name), 0)),
                "lent": format_quantity(lent.get((flavor.flavor, quota.name), 0)),
            }
            for quota in flavor.resources
        ]
        out.append({"flavor": flavor.flavor, "resources": resources})
    return out


def find_pool_problems(
    pool: ResourcePool, flavors: Collection[str], cohorts: Sequence[Cohort]
) -> list[Problem]:
    """What keeps `pool` from being Active: quotas the engine cannot read, flavors its quotas
    name that no ResourceFlavor has (`flavors`: those that exist), a cohort tree that cannot be
    read (`cohorts`: every Cohort object)."""
    try:
        model.build_scenario(pools=[pool_of(pool, {})])
    except AdmissionError as exc:
        return [Problem(Reason.INVALID_QUOTA, f"spec.quotas: {exc}: fix the pool's quotas")]
    problems = [
        Problem(
            Reason.FLAVOR_NOT_FOUND,
            f"ResourceFlavor {quotas.flavor} not found: create it or remove it from spec.quotas",
        )
        for quotas in pool.spec.quotas or ()
        if quotas.flavor not in flavors
    ]
    try:
        model.build_scenario(cohorts=[cohort_of(c) for c in cohorts], pools=[pool_of(pool, {})])
    except AdmissionError as exc:
        problems.append(
            Problem(
                Reason.INVALID_COHORT,
                f"the Cohorts cannot be read ({exc}): no workload is admitted until they are fixed",
            )
        )
    return problems


def plan_pool_status(
    pool: ResourcePool,
    usage: Mapping[str, Any],
    problems: Sequence[Problem],
    *,
    now: datetime,
) -> StatusPatch[ResourcePoolStatus]:
    """The pool's whole status: `usage` (its entry of `plan_pool_statuses`) and the Active
    condition from `problems` (`find_pool_problems`)."""
    generation = generation_of(pool.metadata)
    known = pool.status.conditions if pool.status is not None else None
    condition = conditions_at(now, known, PoolCondition, generation=generation)
    if problems:
        messages = "; ".join(p.message for p in problems)
        active = condition("Active", problems[0].reason, messages, is_true=False)
    else:
        can = "quotas valid, every flavor found: admits workloads"
        active = condition("Active", Reason.POOL_READY, can, is_true=True)
    counts = typeinfo.convert(usage, ResourcePoolStatus)
    status = msgspec.structs.replace(counts, conditions=[active], observed_generation=generation)
    return StatusPatch.of(status, _PASS_OWNS)
