"""kopf's handlers for ActorGroups: thin, as the AsyncActors' are.

- an ActorGroup created, resumed (at start) or updated: `GroupReconciler.reconcile`;
- its gang pods' readiness changing (a StatefulSet's status): an admission pass, which steps
  the readiness of its instances (ready, or evicted at the deadline);
- with Kueue admitting, a Kueue Workload changing: an admission pass, which reads Kueue's
  decisions into the statuses;
- a gang scheduler's PodGroup of an instance changing (the scheduler says it cannot place it
  whole, or placed it): an admission pass, which writes that into the group's status. A kind
  the cluster does not serve (its scheduler is not installed) is not watched: kopf says so
  once at start, and watches it once its CRD appears;
- a broker Secret a group names created, changed or deleted: an admission pass, which writes
  the group's status (Degraded naming the Secret, or recovered). An in-memory index of the
  groups' `spec.broker.secretName` (`groups_by_secret`) filters out other Secrets first;
- an ActorGroup deleted (behind kopf's finalizer): `GroupReconciler.release`.
"""

from __future__ import annotations

from typing import Any, Final

import kopf

from asya_operator.api.metadata import GROUP_COMPONENT, MANAGED_BY, secret_name
from asya_operator.api.template import GROUP, VERSION
from asya_operator.kube import GANG_KEYS, KINDS
from asya_operator.reconcile.admission import AdmissionLoop
from asya_operator.reconcile.groups import GroupReconciler

GROUPS: Final = (GROUP, VERSION, KINDS["ActorGroup"].plural)
_OUR_GROUP_OBJECTS: Final = {
    "app.kubernetes.io/managed-by": MANAGED_BY,
    "app.kubernetes.io/component": GROUP_COMPONENT,
}


class GroupHandlers:
    """The handlers, bound to what they hand their work to."""

    def __init__(
        self, groups: GroupReconciler, admission: AdmissionLoop, *, kueue: bool = False
    ) -> None:
        """`kueue`: Kueue admits (the operator's `admission: kueue`): its Workloads are
        watched too."""
        self._groups = groups
        self._admission = admission
        self._kueue = kueue

    def register(self, registry: kopf.OperatorRegistry) -> None:
        """Put every handler on `registry`."""
        for on in (kopf.on.resume, kopf.on.create, kopf.on.update):
            on(*GROUPS, registry=registry, id="reconcile_group")(self.reconcile)
        kopf.on.delete(*GROUPS, registry=registry, id="release_group")(self.release)
        kopf.on.event(
            "apps",
            "v1",
            "statefulsets",
            labels=_OUR_GROUP_OBJECTS,
            registry=registry,
            id="follow_statefulset",
        )(self.follow_gang_object)
        for scheduler, key in GANG_KEYS.items():
            kind = KINDS[key]
            kopf.on.event(
                kind.group,
                kind.version,
                kind.plural,
                labels=_OUR_GROUP_OBJECTS,
                registry=registry,
                id=f"follow_{scheduler}_pod_group",
            )(self.follow_gang_object)
        if self._kueue:
            workloads = KINDS["Workload"]
            kopf.on.event(
                workloads.group,
                workloads.version,
                workloads.plural,
                when=_of_pods,
                registry=registry,
                id="follow_kueue_workload",
            )(self.follow_workload)
        kopf.index(*GROUPS, registry=registry, id="groups_by_secret")(self.groups_by_secret)
        kopf.on.event("v1", "secrets", when=_is_used, registry=registry, id="follow_group_secret")(
            self.follow_secret
        )

    async def reconcile(self, *, body: kopf.Body, namespace: str | None, **_: Any) -> None:
        """Admit and apply an ActorGroup, declare its members' queues, or report what it
        lacks."""
        await self._groups.reconcile(body, _namespaced(namespace))

    async def release(
        self,
        *,
        body: kopf.Body,
        namespace: str | None,
        retry: int,
        logger: kopf.Logger,
        **_: Any,
    ) -> None:
        """Free the group's quota, stop its pods, delete its members' queues."""
        await self._groups.release(body, _namespaced(namespace), retry, logger)

    async def follow_gang_object(self, *, event: kopf.RawEvent, **_: Any) -> None:
        """A gang's StatefulSet (its pods became ready or not: the pass steps the instances'
        readiness) or its scheduler's PodGroup (the scheduler said something of the instance:
        the pass writes it in the status) changed. One deleted is the pass's own doing."""
        if event["type"] != "DELETED":
            self._admission.request()

    async def follow_workload(self, *, event: kopf.RawEvent, **_: Any) -> None:
        """Kueue admitted, evicted or queued a workload: the pass writes it in the statuses of
        the groups and actors it is for."""
        self._admission.request()

    async def groups_by_secret(
        self, *, namespace: str | None, name: str, spec: kopf.Spec, **_: Any
    ) -> dict[tuple[str | None, str], str]:
        """Which groups use which broker Secret: (namespace, Secret name) -> groups' names."""
        return {(namespace, secret_name(spec)): name}

    async def follow_secret(self, **_: Any) -> None:
        """A broker Secret a group names appeared, changed or went: the pass reports it."""
        self._admission.request()


def _of_pods(body: kopf.Body, **_: Any) -> bool:
    """A Kueue Workload of pods (plain pods and pod groups, as asya's are), not of a Job or
    another framework's object: only those can be an actor's or a gang's."""
    owners = body.get("metadata", {}).get("ownerReferences") or ()
    return any(owner.get("kind") == "Pod" for owner in owners)


def _is_used(*, namespace: str | None, name: str, **kwargs: Any) -> bool:
    # Called for every Secret event: an in-memory look-up, no request to the API server.
    users: kopf.Index[tuple[str | None, str], str] = kwargs["groups_by_secret"]
    return bool(users.get((namespace, name)))


def _namespaced(namespace: str | None) -> str:
    if namespace is None:  # ActorGroups are namespaced: never so
        raise kopf.PermanentError("an ActorGroup without a namespace")
    return namespace
