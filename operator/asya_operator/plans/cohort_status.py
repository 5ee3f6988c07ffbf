"""A Cohort's status from an admission pass: usage, borrowed and lent per flavor.

Pure: the cohorts and who borrows and lends what through them (`quota.Lending`) in; one `status` per
Cohort object out (a cohort that pools only name has no object to hold one). Per flavor and
resource of the cohort's subtree (its own quota, and its pools' and cohorts' below it):
- usage: what the admitted workloads of every pool below it request;
- borrowed: what the subtree takes from the cohort's parent above what it has there
  (`quota.Lending`; a root cohort borrows only if quota shrank under running work);
- lent: the part of the subtree's unused nominal quota that the other members of its parent
  cohort use (`quota.Lending`; a root cohort lends nothing).
Not written while the Cohorts cannot be read (a loop in their parents): the pools' Active
condition says why, and no admission runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from asya.admission.quantity import format_quantity
from asya_operator.api.pool import Cohort, CohortStatus
from asya_operator.plans.quota import Lending
from asya_operator.plans.statuses import StatusPatch

_PASS_OWNS: Final = ("flavors_usage",)
"""What an admission pass writes of a cohort's status: all of it."""


def plan_cohort_statuses(
    cohorts: Sequence[Cohort], found: Lending
) -> dict[str, StatusPatch[CohortStatus]]:
    """The status of each of `cohorts` (by name) after a pass whose borrowing and lending is
    `found` (`quota.lending` of the pools' usage, with `cohorts`); none while the cohorts
    cannot be read."""
    if not found.cohorts_read:
        return {}
    return {str(c.metadata["name"]): _status(found, str(c.metadata["name"])) for c in cohorts}


def _status(found: Lending, name: str) -> StatusPatch[CohortStatus]:
    member = ("cohort", name)
    quota, used = found.nominal[member], found.used[member]
    borrowed, lent = found.borrowed[member], found.lent[member]
    by_flavor: dict[str, list[dict[str, str]]] = {}
    for flavor, resource in [*quota, *(k for k in used if k not in quota)]:
        key = (flavor, resource)
        by_flavor.setdefault(flavor, []).append(
            {
                "name": resource,
                "usage": format_quantity(used.get(key, 0)),
                "borrowed": format_quantity(borrowed.get(key, 0)),
                "lent": format_quantity(lent.get(key, 0)),
            }
        )
    rows = [{"flavor": f, "resources": r} for f, r in by_flavor.items()]
    status = msgspec.convert({"flavorsUsage": rows}, CohortStatus)
    return StatusPatch.of(status, _PASS_OWNS)
