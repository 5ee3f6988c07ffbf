"""One ActorGroup's own objects and queues, kept in line with its CR.

What each gang instance runs, its StatefulSets and Services and the group's status are the
admission loop's (`reconcile.admission`): a group's change asks for a pass that applies its
objects from its new spec (`settle(refresh=...)`). What is the group's own is here:
- **reconcile** (create, resume, update): after that pass, the namespace's end actors (the
  group is one of their owners) and its members' queues declared (before the first envelope,
  as for any actor); `observedGeneration` is written last. While it lacks something (its
  Secret, a flavor, a member's actor name, which an AsyncActor or another group's member
  keeps: `plans.names`) the pass leaves it `Degraded` with nothing applied,
  and kopf tries again every `recheck_s`.
- **release** (delete, behind kopf's finalizer): a pass (its quota is free for others), its
  StatefulSets and Services deleted (Kubernetes' garbage collector would too: they are
  owned), the end actors lose this owner, and its members' queues are deleted unless
  `keepQueues`, but for those whose actor name another object runs as too (a refused group's
  queues are the keeper's; a keeper's stay for the object refused its name).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import kopf

from asya.errors import TransportError
from asya_operator.api.decoding import StoredSpecError, decode
from asya_operator.api.group import ActorGroup, member_actor
from asya_operator.api.metadata import secret_name
from asya_operator.api.template import BROKER_AMQP_URL_KEY
from asya_operator.config import OperatorConfig
from asya_operator.identities import Identities
from asya_operator.kube import Kube
from asya_operator.plans.actor_objects import end_actor_owners, plan_end_actors
from asya_operator.plans.conditions import Reason
from asya_operator.plans.group_status import plan_group_refused_status, plan_observed_generation
from asya_operator.plans.names import shared, shared_names
from asya_operator.queues import declare_actor_queues, release_queues


class Settle(Protocol):
    """Ask for an admission pass and wait for it (`AdmissionLoop.settle`)."""

    def __call__(self, *, refresh: tuple[str, str] | None = None) -> Awaitable[None]: ...


class GroupReconciler:
    """Keeps ActorGroups' end actors and queues in line (see the module docstring)."""

    def __init__(
        self,
        kube: Kube,
        config: OperatorConfig,
        *,
        settle: Settle,
        identities: Identities | None = None,
    ) -> None:
        self._kube = kube
        self._config = config
        self._settle = settle
        self._identities = identities or Identities(kube, config)

    async def reconcile(self, body: Mapping[str, Any], namespace: str) -> None:
        """Admit and apply an ActorGroup, declare its members' queues, or report what it lacks.

        Raises:
            kopf.TemporaryError: it lacks something, or the broker is unreachable: kopf
                calls this again after `recheck_s`.
        """
        recheck_s = self._config.recheck_s
        try:
            group = decode(body, ActorGroup)
        except StoredSpecError as exc:
            await self._refuse(body, namespace, exc)
            # Tried again when the spec changes (an update), not before.
            raise kopf.PermanentError(f"Degraded, nothing applied: {exc}") from exc
        name = group.metadata["name"]
        try:
            await self._identities.ensure(namespace, group.spec.broker.secret_name)
        except TransportError as exc:  # the pass reports the Secret it lacks meanwhile
            raise kopf.TemporaryError(
                f"broker identity not made: {exc}; trying again in {recheck_s} s", delay=recheck_s
            ) from exc
        await self._settle(refresh=(namespace, name))
        fresh = await self._kube.read(ActorGroup, namespace, name)
        degraded = _degraded(fresh)
        if fresh is None or degraded is not None:
            raise kopf.TemporaryError(
                f"Degraded, nothing applied: {degraded}; checking again in {recheck_s} s",
                delay=recheck_s,
            )
        world = await self._kube.world(fresh, namespace)
        owners = end_actor_owners(world.owners, current=fresh)
        await self._kube.apply(plan_end_actors(namespace, owners, self._config))
        url = (world.secret or {}).get(BROKER_AMQP_URL_KEY)
        if url is None:  # gone since the pass found it: the next pass says so in the status
            secret = fresh.spec.broker.secret_name
            raise kopf.TemporaryError(
                f"Secret {namespace}/{secret} or its {BROKER_AMQP_URL_KEY} is gone;"
                f" checking again in {recheck_s} s",
                delay=recheck_s,
            )
        try:
            for member in group.spec.members:
                await declare_actor_queues(url, namespace, member_actor(name, member.name))
        except TransportError as exc:
            raise kopf.TemporaryError(
                f"queues not declared: {exc}; trying again in {recheck_s} s", delay=recheck_s
            ) from exc
        await self._kube.patch_status(ActorGroup, namespace, name, plan_observed_generation(group))

    async def release(
        self, body: Mapping[str, Any], namespace: str, retry: int, logger: kopf.Logger
    ) -> None:
        """Free the group's quota, stop its pods, and delete its members' queues (unless
        `keepQueues`).

        Raises:
            kopf.TemporaryError: the broker is unreachable (a few times, then the queues are
                left).
        """
        try:
            group = decode(body, ActorGroup)
        except StoredSpecError as exc:
            await self._release_refused(body, namespace, retry, logger, exc)
            return
        name = group.metadata["name"]
        await self._settle()  # a group being deleted is in no pass: its quota is free
        await self._kube.delete_group_objects(namespace, name)
        world = await self._kube.world(group, namespace)
        owners = end_actor_owners(world.owners, leaving=("ActorGroup", name))
        if owners:
            await self._kube.apply(plan_end_actors(namespace, owners, self._config))
        await release_queues(
            (world.secret or {}).get(BROKER_AMQP_URL_KEY),
            namespace,
            [member_actor(name, m.name) for m in group.spec.members],
            shared=shared_names(group, world.name_owners.staying),
            keep=group.spec.keep_queues,
            attempt=retry,
            recheck_s=self._config.recheck_s,
            logger=logger,
        )
        await self._identities.release(namespace)

    async def _refuse(
        self, body: Mapping[str, Any], namespace: str, error: StoredSpecError
    ) -> None:
        """Report a stored spec the operator cannot take: Degraded, and a Warning Event."""
        message = str(error)
        status = plan_group_refused_status(message, now=datetime.now(UTC))
        # The Event first: whoever sees the status finds it posted.
        await self._kube.post_event(
            body, warning=True, reason=str(Reason.INVALID_SPEC), message=message
        )
        await self._kube.patch_status(ActorGroup, namespace, body["metadata"]["name"], status)

    async def _release_refused(
        self,
        body: Mapping[str, Any],
        namespace: str,
        retry: int,
        logger: kopf.Logger,
        error: StoredSpecError,
    ) -> None:
        """Delete a group whose spec does not decode, as far as its stored body tells: the
        objects and queues an earlier, valid spec may have made go."""
        logger.warning("deleted with a spec the operator refuses", extra={"error": str(error)})
        name = str(body["metadata"]["name"])
        spec = body.get("spec") or {}
        await self._kube.delete_group_objects(namespace, name)
        members = [
            str(m["name"])
            for m in spec.get("members") or ()
            if isinstance(m, Mapping) and m.get("name")
        ]
        secret = await self._kube.read_secret(namespace, secret_name(spec))
        actors = [member_actor(name, member) for member in members]
        others = (await self._kube.name_owners(namespace)).staying
        await release_queues(
            (secret or {}).get(BROKER_AMQP_URL_KEY),
            namespace,
            actors,
            shared=shared(actors, others, leaving=("ActorGroup", name)),
            keep=spec.get("keepQueues") is True,
            attempt=retry,
            recheck_s=self._config.recheck_s,
            logger=logger,
        )


def _degraded(group: ActorGroup | None) -> str | None:
    for condition in (group.status.conditions or ()) if group and group.status else ():
        if condition.type == "Degraded" and condition.status == "True":
            return condition.message or "Degraded"
    return None
