"""The quota invariant, checked on the stand-in cluster at every write of a Deployment or
StatefulSet: what the pooled actors' Deployments and the gangs' StatefulSets run never needs
more than their pools have.

What runs is counted from the objects themselves, not from statuses: a Deployment or
StatefulSet asks `spec.replicas` times its runtime container's request (the limit where no request
is set, as the API server defaults it) of each resource a pool has quota for. A workload counts
in its pool's cohort (the root of the cohort tree), or in its pool alone without one, and the
cohort's quota is the sum of its pools' nominal quotas and its cohorts' own, over every
flavor. An object counts in
the pool its owner named when the object was last written (its owner may since have moved or
gone: its pods run where they were admitted until the operator writes the object again).

Test-only; `QuotaWatch.violations` holds every moment a write left a cohort above its quota.
"""

from __future__ import annotations

import collections
from typing import Any

from asya_operator.api.metadata import ACTOR_COMPONENT, GROUP_COMPONENT, GROUP_LABEL
from asya_operator.plans.pods import RUNTIME_CONTAINER

from asya.admission.quantity import parse_quantity
from tests.operator.controller_world import ACTORS, DEPLOYMENTS, GROUPS, STATEFULSETS
from tests.operator.emulator import Cluster

POOLS = "asya.sh/v1alpha1/resourcepools"
COHORTS = "asya.sh/v1alpha1/cohorts"
_COMPONENT = "app.kubernetes.io/component"

Scope = str
"""`cohort/<root cohort>`, or `pool/<name>` for a pool in no cohort."""


class QuotaWatch:
    """Samples the quota invariant after every Deployment and StatefulSet write of `cluster`."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.violations: list[str] = []
        self.samples = 0
        self._pool_of: dict[tuple[str, str, str], str] = {}
        cluster.after_write(DEPLOYMENTS, self._sample)
        cluster.after_write(STATEFULSETS, self._sample)

    def _sample(self) -> None:
        self.samples += 1
        quota = self._quota()
        usage: dict[tuple[Scope, str], int] = collections.defaultdict(int)
        running: dict[Scope, list[str]] = collections.defaultdict(list)
        for kind, obj in self._workloads():
            pool = self._pool(kind, obj)
            if pool is None:
                continue
            scope = self._scope(pool)
            replicas = int(obj["spec"].get("replicas") or 0)
            for resource, milli in _runtime_requests(obj).items():
                if (scope, resource) in quota:
                    usage[scope, resource] += replicas * milli
            running[scope].append(f"{kind} {obj['metadata']['name']}={replicas}")
        for (scope, resource), used in sorted(usage.items()):
            if used > quota[scope, resource]:
                self.violations.append(
                    f"{scope}: {resource} {used / 1000:g} > quota"
                    f" {quota[scope, resource] / 1000:g} ({', '.join(sorted(running[scope]))})"
                )

    def _workloads(self) -> list[tuple[str, dict[str, Any]]]:
        found = [
            ("Deployment", d)
            for d in self.cluster.stored(DEPLOYMENTS)
            if (d["metadata"].get("labels") or {}).get(_COMPONENT) == ACTOR_COMPONENT
        ]
        found += [
            ("StatefulSet", s)
            for s in self.cluster.stored(STATEFULSETS)
            if (s["metadata"].get("labels") or {}).get(_COMPONENT) == GROUP_COMPONENT
        ]
        return found

    def _pool(self, kind: str, obj: dict[str, Any]) -> str | None:
        """The pool `obj` counts in: its owner's now, else the one remembered."""
        meta = obj["metadata"]
        key = (kind, meta["namespace"], meta["name"])
        if kind == "Deployment":
            owner = self.cluster.current(ACTORS, meta["namespace"], meta["name"])
        else:
            group = meta["labels"][GROUP_LABEL]
            owner = self.cluster.current(GROUPS, meta["namespace"], group)
        if owner is not None:
            pool = owner.get("spec", {}).get("pool")
            if pool is None:
                self._pool_of.pop(key, None)
            else:
                self._pool_of[key] = str(pool)
        return self._pool_of.get(key)

    def _scope(self, pool_name: str) -> Scope:
        pool = self.cluster.current(POOLS, None, pool_name)
        cohort = None if pool is None else pool["spec"].get("cohort")
        if cohort is None:
            return f"pool/{pool_name}"
        return self._root(cohort)

    def _root(self, cohort: str) -> Scope:
        """The root of the cohort tree `cohort` is in."""
        seen = {cohort}
        while True:
            parent = (self.cluster.current(COHORTS, None, cohort) or {}).get("spec", {})
            above = parent.get("parent")
            if above is None or above in seen:
                return f"cohort/{cohort}"
            seen.add(above)
            cohort = above

    def _quota(self) -> dict[tuple[Scope, str], int]:
        quota: dict[tuple[Scope, str], int] = collections.defaultdict(int)
        for pool in self.cluster.stored(POOLS):
            scope = self._scope(pool["metadata"]["name"])
            for flavor in pool["spec"].get("quotas") or ():
                for resource in flavor["resources"]:
                    quota[scope, resource["name"]] += parse_quantity(resource["nominal"])
        for cohort in self.cluster.stored(COHORTS):  # quota a cohort owns, lent to its tree
            scope = self._root(cohort["metadata"]["name"])
            for flavor in cohort.get("spec", {}).get("quotas") or ():
                for resource in flavor["resources"]:
                    quota[scope, resource["name"]] += parse_quantity(resource["nominal"])
        return quota


def _runtime_requests(obj: dict[str, Any]) -> dict[str, int]:
    """What one replica's runtime container asks of each resource, in thousandths."""
    (runtime,) = [
        c for c in obj["spec"]["template"]["spec"]["containers"] if c["name"] == RUNTIME_CONTAINER
    ]
    resources = runtime.get("resources") or {}
    asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: parse_quantity(value) for name, value in asked.items()}
