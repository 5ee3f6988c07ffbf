"""kopf's handler for Namespaces: a namespace's `asya.sh/default-pool` label changing.

An AsyncActor or ActorGroup without `spec.pool` is admitted by its namespace's default pool
(`plans.pools`). When a namespace gets the label, loses it or names another pool, each of its
actors without a pool of its own is reconciled again (`ActorReconciler.follow_default_pool`:
into the pool, into another, or out of quota, as if its own `spec.pool` had changed), and each
such group is refreshed by an admission pass (`AdmissionLoop.request`), which admits and
applies groups.

Cheap on purpose: one event handler for every Namespace, which remembers each namespace's
default pool in memory and does nothing unless that changed (another label, an annotation, a
namespace terminating cost a dict look-up, no request). Which actors and groups have no pool
is kept by two kopf indices (`pool_less_actors`, `pool_less_groups`), in memory too. kopf
watches Namespaces cluster-wide even when the operator serves one namespace (a Namespace is
cluster-scoped); only that namespace's actors and groups are in the indices. Not kopf's
`on.field`: it would store its diff base in an annotation on every Namespace, a write the
operator has no business making.

The first sight of a namespace (kopf's first listing at start, or a namespace created since)
only records its label: the actors already there are reconciled at start anyway (kopf resumes
each), and a namespace just created has none yet. An actor's reconcile that fails here (its
broker unreachable, or no pool any more where one is required) leaves it Degraded saying so,
and its own recheck tries it again. One that fails because the API server or an admission pass
did (nothing says so on the actor) is tried again `retry_s` later (`ASYA_OPERATOR_RECHECK_S`),
and at the namespace's next event, until it is reconciled or the label changes again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import kopf

from asya_operator.api.template import GROUP, VERSION
from asya_operator.kube import KINDS
from asya_operator.plans.pools import DEFAULT_POOL_LABEL
from asya_operator.reconcile.actors import ActorReconciler
from asya_operator.reconcile.admission import AdmissionLoop

_ACTORS: Final = (GROUP, VERSION, KINDS["AsyncActor"].plural)
_GROUPS: Final = (GROUP, VERSION, KINDS["ActorGroup"].plural)

_UNFOLLOWED: Final = "\x00unfollowed"
"""Recorded for a namespace whose last label change did not reach all its actors: no label
value equals it, so its next event counts as a change."""

PoolLess = kopf.Index[str | None, str]
"""The `pool_less_actors` and `pool_less_groups` indices: namespace -> names."""


class NamespaceHandlers:
    """The handler, bound to what it hands its work to, and the default pools it has seen."""

    def __init__(
        self,
        actors: ActorReconciler,
        admission: AdmissionLoop,
        *,
        retry_s: float = 30.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """`retry_s`: how long after a failed reconcile it is tried again; `sleep` waits it."""
        self._actors = actors
        self._admission = admission
        self._default_pools: dict[str, str | None] = {}
        self._retry_s = retry_s
        self._sleep = sleep
        self._retries: dict[str, asyncio.Task[None]] = {}
        """Per namespace, the task that tries its failed actors again."""
        self._following: set[asyncio.Task[None] | None] = set()
        """The retries reconciling now."""

    def register(self, registry: kopf.OperatorRegistry) -> None:
        """Put the handler and its indices on `registry`."""
        kopf.index(*_ACTORS, registry=registry, id="pool_less_actors")(_pool_less)
        kopf.index(*_GROUPS, registry=registry, id="pool_less_groups")(_pool_less)
        kopf.on.event("v1", "namespaces", registry=registry, id="follow_namespace")(
            self.follow_namespace
        )
        kopf.on.cleanup(registry=registry, id="stop_namespace_retries")(self.stop)

    async def stop(self, **_: Any) -> None:
        """Cancel every retry (the operator is stopping, as kopf's own handlers are)."""
        retries = list(self._retries.values())
        self._retries.clear()
        for retry in retries:
            retry.cancel()
        await asyncio.gather(*retries, return_exceptions=True)

    async def follow_namespace(
        self,
        *,
        event: kopf.RawEvent,
        name: str,
        labels: kopf.Labels,
        logger: kopf.Logger,
        **indices: Any,
    ) -> None:
        """A Namespace appeared, changed or went: if its default pool changed, its pool-less
        actors are reconciled again and its pool-less groups refreshed by a pass."""
        if event["type"] == "DELETED":  # its actors and groups go with it
            self._default_pools.pop(name, None)
            self._stop_retrying(name)
            return
        pool = labels.get(DEFAULT_POOL_LABEL) or None
        seen = name in self._default_pools
        before = self._default_pools.get(name)
        self._default_pools[name] = pool
        if not seen or pool == before:
            return
        self._stop_retrying(name)  # this event follows every pool-less actor again
        groups = _names(indices, "pool_less_groups", name)
        actors = _names(indices, "pool_less_actors", name)
        if not groups and not actors:  # a namespace of no one's (or not watched)
            return
        logger.info("default pool changed", extra={"before": before, "after": pool})
        for group in groups:
            self._admission.request(refresh=(name, group))
        failed = await self._follow_all(name, actors, logger)
        if failed:
            # Not all of them moved: the next event of this namespace (any change to it, kopf
            # listing again after a lost watch) differs from this and tries them all again;
            # until one comes, those that failed are tried again `retry_s` later.
            self._default_pools[name] = _UNFOLLOWED
            retry = asyncio.create_task(self._retry(name, pool, failed, logger))
            self._retries[name] = retry
            retry.add_done_callback(lambda task: self._forget(name, task))

    async def _follow_all(
        self, namespace: str, actors: list[str], logger: kopf.Logger
    ) -> list[str]:
        """Reconcile `actors` again; those that failed for want of the API or a pass."""
        # Together: the passes they wait for are coalesced, one for all of them.
        followed = await asyncio.gather(*(self._follow(namespace, a, logger) for a in actors))
        return [actor for actor, ok in zip(actors, followed, strict=True) if not ok]

    async def _retry(
        self, namespace: str, pool: str | None, failed: list[str], logger: kopf.Logger
    ) -> None:
        me = asyncio.current_task()
        while failed:
            await self._sleep(self._retry_s)
            self._following.add(me)  # not cut short now: a reconcile runs to its end
            try:
                failed = await self._follow_all(namespace, failed, logger)
            finally:
                self._following.discard(me)
            if self._retries.get(namespace) is not me:
                return  # an event has followed them all again since
        if self._default_pools.get(namespace) == _UNFOLLOWED:
            self._default_pools[namespace] = pool  # every actor moved: no event needs to

    def _stop_retrying(self, namespace: str) -> None:
        """The namespace's retry is not needed any more: cancelled while it waits; one
        reconciling now finishes and stops there."""
        retry = self._retries.pop(namespace, None)
        if retry is not None and retry not in self._following:
            retry.cancel()

    def _forget(self, namespace: str, task: asyncio.Task[None]) -> None:
        if self._retries.get(namespace) is task:
            del self._retries[namespace]

    async def _follow(self, namespace: str, actor: str, logger: kopf.Logger) -> bool:
        """Whether the actor was reconciled; a failure is logged (the others go on)."""
        try:
            await self._actors.follow_default_pool(namespace, actor, logger)
        except kopf.TemporaryError as exc:  # its status says why; its recheck tries again
            fields = {"object": f"{namespace}/{actor}", "error": str(exc)}
            logger.warning("not reconciled", extra=fields)
        except Exception as exc:  # the API or an admission pass failing: nothing says so
            fields = {"object": f"{namespace}/{actor}", "error": repr(exc)}
            logger.error("not reconciled; tried again soon", extra=fields)
            return False
        return True


async def _pool_less(
    *, namespace: str | None, name: str, spec: kopf.Spec, **_: Any
) -> dict[str | None, str]:
    """An actor or group without a pool of its own, under its namespace. One that gained a
    pool gives an empty dict, not None: kopf keeps an object's last entry on None."""
    return {} if spec.get("pool") else {namespace: name}


def _names(indices: Mapping[str, Any], index: str, namespace: str) -> list[str]:
    # kopf passes its indices as keyword arguments; its handler protocols do not name ours.
    found: PoolLess = indices[index]
    return sorted(found.get(namespace, ()))
