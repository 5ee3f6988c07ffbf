"""kopf's handlers for AsyncActors, and for what admission follows (pools, cohorts).

Thin on purpose: each handler hands its object to `ActorReconciler`, or tells the admission
loop that something changed. Ids are given explicitly: kopf records a handler's progress on
the object under its id, so they outlive a rename.

- an AsyncActor created, resumed (at start) or updated: `reconcile`;
- its Deployment's status changing (pods becoming ready): `follow`;
- a broker Secret an actor names created, changed or deleted: `follow` for each actor that
  names it. kopf watches every Secret in scope (the chart's RBAC grants `list` and `watch` on
  Secrets for it); an in-memory index of the actors' `spec.broker.secretName`
  (`actors_by_secret`) filters out the others before any handler runs, so they cost no
  request;
- a ResourcePool, Cohort or ResourceFlavor changing: an admission pass (`request`);
- an AsyncActor deleted (behind kopf's finalizer): `release`.

kopf retries a failed change handler but not a failed event handler: a `follow` that fails
(the API server slow or away) would drop that status update until the next event. It is tried
again `retry_s` later (`ASYA_OPERATOR_RECHECK_S`), and again while it fails; a new event of the
same actor follows it anew and replaces a retry not yet under way; the retries stop with the
operator.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import kopf

from asya_operator.api.metadata import ACTOR_COMPONENT, MANAGED_BY, secret_name
from asya_operator.api.template import GROUP, VERSION
from asya_operator.kube import KINDS
from asya_operator.reconcile.actors import ActorReconciler
from asya_operator.reconcile.admission import AdmissionLoop

ACTORS: Final = (GROUP, VERSION, KINDS["AsyncActor"].plural)
_OUR_ACTOR_DEPLOYMENTS: Final = {
    "app.kubernetes.io/managed-by": MANAGED_BY,
    "app.kubernetes.io/component": ACTOR_COMPONENT,
}

_log = logging.getLogger(__name__)

Actor = tuple[str, str]
"""An actor as (namespace, name)."""

SecretUsers = kopf.Index[tuple[str | None, str], str]
"""The `actors_by_secret` index kopf passes to the handlers."""


class ActorHandlers:
    """The handlers, bound to what they hand their work to."""

    def __init__(
        self,
        actors: ActorReconciler,
        admission: AdmissionLoop,
        *,
        retry_s: float = 30.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """`retry_s`: how long after a failed `follow` it is tried again; `sleep` waits it."""
        self._actors = actors
        self._admission = admission
        self._retry_s = retry_s
        self._sleep = sleep
        self._retries: dict[Actor, asyncio.Task[None]] = {}
        """Per actor, the task that follows it again after a failure, while it waits."""

    def register(self, registry: kopf.OperatorRegistry) -> None:
        """Put every handler on `registry`."""
        for on in (kopf.on.resume, kopf.on.create, kopf.on.update):
            on(*ACTORS, registry=registry, id="reconcile")(self.reconcile)
        kopf.on.delete(*ACTORS, registry=registry, id="release")(self.release)
        kopf.on.event(
            "apps",
            "v1",
            "deployments",
            labels=_OUR_ACTOR_DEPLOYMENTS,
            registry=registry,
            id="follow_deployment",
        )(self.follow_deployment)
        kopf.index(*ACTORS, registry=registry, id="actors_by_secret")(self.actors_by_secret)
        kopf.on.event("v1", "secrets", when=_is_used, registry=registry, id="follow_secret")(
            self.follow_secret
        )
        for kind in ("ResourcePool", "Cohort", "ResourceFlavor"):
            quota = KINDS[kind]
            kopf.on.event(
                quota.group, quota.version, quota.plural, registry=registry, id="follow_quota"
            )(self.follow_quota)
        kopf.on.cleanup(registry=registry, id="stop_follow_retries")(self.stop)

    async def stop(self, **_: Any) -> None:
        """Cancel every retry of a failed follow (the operator is stopping)."""
        retries = list(self._retries.values())
        self._retries.clear()
        for retry in retries:
            retry.cancel()
        await asyncio.gather(*retries, return_exceptions=True)

    async def reconcile(
        self, *, body: kopf.Body, namespace: str | None, logger: kopf.Logger, **_: Any
    ) -> None:
        """Apply an AsyncActor's objects and declare its queues, or report what it lacks."""
        await self._actors.reconcile(body, _namespaced(namespace), logger)

    async def release(
        self,
        *,
        body: kopf.Body,
        namespace: str | None,
        retry: int,
        logger: kopf.Logger,
        **_: Any,
    ) -> None:
        """Free what the actor held and delete its queues (unless `keepQueues`)."""
        await self._actors.release(body, _namespaced(namespace), retry, logger)

    async def follow_deployment(
        self, *, event: kopf.RawEvent, namespace: str | None, name: str, **_: Any
    ) -> None:
        """Report an actor's replicas as its Deployment's status changes."""
        if event["type"] != "DELETED":
            await self._follow((_namespaced(namespace), name))

    async def actors_by_secret(
        self, *, namespace: str | None, name: str, spec: kopf.Spec, **_: Any
    ) -> dict[tuple[str | None, str], str]:
        """Which actors use which broker Secret: (namespace, Secret name) -> actors' names."""
        return {(namespace, secret_name(spec)): name}

    async def follow_secret(self, *, namespace: str | None, name: str, **kwargs: Any) -> None:
        """A broker Secret appeared, changed or went: each actor that uses it reports it."""
        for actor in _users(namespace, name, kwargs):
            await self._follow((_namespaced(namespace), actor))

    async def follow_quota(self, **_: Any) -> None:
        """A pool, cohort or flavor appeared, changed or went: admission decides again."""
        self._admission.request()

    async def _follow(self, actor: Actor) -> None:
        """`ActorReconciler.follow`, replacing a retry that waits; tried again later if it
        fails (logged, not raised: kopf would only log it)."""
        waiting = self._retries.pop(actor, None)
        if waiting is not None:
            waiting.cancel()
        try:
            await self._actors.follow(*actor)
        except Exception as exc:
            fields = {"object": "/".join(actor), "error": repr(exc)}
            _log.error("status not followed; tried again soon", extra=fields)
            retry = asyncio.create_task(self._retry(actor))
            self._retries[actor] = retry
            retry.add_done_callback(lambda task: self._forget(actor, task))

    async def _retry(self, actor: Actor) -> None:
        await self._sleep(self._retry_s)
        if self._retries.get(actor) is asyncio.current_task():
            del self._retries[actor]  # under way: no event cancels it now
            await self._follow(actor)

    def _forget(self, actor: Actor, task: asyncio.Task[None]) -> None:
        if self._retries.get(actor) is task:
            del self._retries[actor]


def _namespaced(namespace: str | None) -> str:
    if namespace is None:  # AsyncActors and Deployments are namespaced: never so
        raise kopf.PermanentError("an AsyncActor without a namespace")
    return namespace


def _users(namespace: str | None, name: str, indices: Mapping[str, Any]) -> list[str]:
    # kopf passes its indices as keyword arguments; its handler protocols do not name ours.
    users: SecretUsers = indices["actors_by_secret"]
    return sorted(users.get((namespace, name), ()))


def _is_used(*, namespace: str | None, name: str, **kwargs: Any) -> bool:
    # Called for every Secret event: an in-memory look-up, no request to the API server.
    return bool(_users(namespace, name, kwargs))
