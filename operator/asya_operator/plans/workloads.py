"""Admission's vocabulary on the operator's side: the pooled actors and groups a pass weighs,
and the decisions it makes for them.

Plain data, no logic: the admission pass (`admission`) takes `PooledActor`s and `PooledGroup`s
and returns `Decisions`; statuses (`actor_status`, `pool_status`) and gang instances
(`instances`) read them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from asya_operator.api.group import MemberHold
from asya_operator.api.template import ActorResources

ActorKey = tuple[str, str]
"""(namespace, name) of an AsyncActor."""


GroupKey = tuple[str, str]
"""(namespace, name) of an ActorGroup."""


@dataclasses.dataclass(frozen=True)
class PooledActor:
    """An AsyncActor with `spec.pool`, as the controller sees it at the start of a pass."""

    namespace: str
    name: str
    pool: str
    priority: int
    age: int
    """Smaller is older (the controller passes creation order)."""
    flavor: str | None
    """The flavor the AsyncActor names (spec.flavor), if any."""
    resources: ActorResources
    """Per replica."""
    desired: int
    """Replicas KEDA asks for, already clipped to min/max by the caller."""
    admitted: int
    """Replicas holding quota now (from the actor's status)."""
    admitted_flavor: str | None
    """The flavor they hold it in."""


@dataclasses.dataclass(frozen=True)
class PooledMember:
    """One member of a pooled ActorGroup, as one pod set of each instance."""

    name: str
    replicas: int
    min_replicas: int | None
    resources: ActorResources
    """Per replica."""
    flavor: str | None
    """The flavor the member's template names, if any."""


@dataclasses.dataclass(frozen=True)
class PooledGroup:
    """An ActorGroup with `spec.pool`, as the controller sees it at the start of a pass."""

    namespace: str
    name: str
    pool: str
    priority: int
    age: int
    """Smaller is older (creation order, shared with the actors')."""
    members: tuple[PooledMember, ...]
    pending: tuple[int, ...]
    """Instances asking for quota."""
    held: Mapping[int, Mapping[str, MemberHold]]
    """Instances holding quota: member name -> (flavor, replicas)."""


@dataclasses.dataclass(frozen=True)
class ActorAdmission:
    """What one pass decided for one actor."""

    admitted: int
    """Replicas the Deployment may run now: 0 <= admitted <= desired."""
    flavor: str | None
    """The flavor they hold quota in (None when admitted == 0)."""
    borrowing: bool
    """Some of it is borrowed from the cohort."""
    message: str | None
    """Why not all desired replicas are admitted, in words; None when all are."""
    preempted_by: str | None
    """The workload that took quota from this one in this pass, if any (`namespace/name` for
    an actor, `namespace/name[i]` for a gang instance)."""
    accelerator_fallback: str | None = None
    """Why replicas that ask for no accelerator hold quota in a flavor that offers them (the
    engine's `AcceleratorFallback` message: "on h100: ..."); None when they do not."""


@dataclasses.dataclass(frozen=True)
class InstanceAdmission:
    """What one pass decided for one gang instance."""

    members: Mapping[str, MemberHold] | None
    """Each member's flavor and replicas while the instance holds quota; None: it does not."""
    borrowing: bool = False
    """Some of its quota is borrowed from the cohort."""
    message: str | None = None
    """Why it waits, in words; None when admitted."""
    preempted_by: str | None = None
    """The workload that took its quota in this pass, if any."""
    accelerator_fallback: str | None = None
    """Why members that ask for no accelerator hold quota in a flavor that offers them, each
    as "member: on h100: ..." (joined by "; "); None when none does."""


@dataclasses.dataclass(frozen=True)
class Decisions:
    """One pass's decisions: for every actor given, and every instance of every group given
    (pending or held)."""

    actors: dict[ActorKey, ActorAdmission]
    groups: dict[GroupKey, dict[int, InstanceAdmission]]
