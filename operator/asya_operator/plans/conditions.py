"""Conditions as every status of the operator writes them: reasons, problems, transition times.

Pure. Shared by the statuses of AsyncActors (`actor_status`), ActorGroups (`group_status`) and
ResourcePools (`pool_status`): a condition whose status did not change keeps the time it had,
each says the generation of the CR it was set from (`observedGeneration`); what a CR lacks is a
`Problem` with a reason and a message naming it.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeVar

from asya_operator.api.template import BROKER_AMQP_URL_KEY, BROKER_MANAGEMENT_URL_KEY, Condition

C = TypeVar("C", bound=Condition)


class Reason(enum.StrEnum):
    """Why a condition is as it is (a condition's `reason`)."""

    SECRET_NOT_FOUND = "SecretNotFound"
    SECRET_KEY_MISSING = "SecretKeyMissing"
    FLAVOR_NOT_FOUND = "FlavorNotFound"
    BROKER_UNREACHABLE = "BrokerUnreachable"
    APPLY_REFUSED = "ApplyRefused"
    AS_EXPECTED = "AsExpected"
    REPLICAS_READY = "ReplicasReady"
    REPLICAS_NOT_READY = "ReplicasNotReady"
    SCALED_TO_ZERO = "ScaledToZero"
    SCALING_UP = "ScalingUp"
    SCALING_DOWN = "ScalingDown"
    STABLE = "Stable"
    QUOTA_RESERVED = "QuotaReserved"
    PENDING = "Pending"
    ADMITTED = "Admitted"
    PREEMPTED = "Preempted"
    NOT_PREEMPTED = "NotPreempted"
    PODS_READY = "PodsReady"
    PODS_NOT_READY = "PodsNotReady"
    GANG_NOT_PLACED = "GangNotPlaced"
    INSTANCES_READY = "InstancesReady"
    EVICTED = "PodsReadyTimeout"
    NOT_EVICTED = "NotEvicted"
    DEACTIVATED = "Deactivated"
    NO_POOL = "NoPool"
    NAME_TAKEN = "NameTaken"  # names.NAME_TAKEN, which the names layer reads below this one
    RECONCILING = "Reconciling"
    INVALID_SPEC = "InvalidSpec"
    POOL_REQUIRED = "PoolRequired"
    GANG_SCHEDULER_MISSING = "GangSchedulerMissing"
    KUEUE_MISSING = "KueueNotInstalled"
    POOL_READY = "Ready"
    INVALID_QUOTA = "InvalidQuota"
    INVALID_COHORT = "InvalidCohort"
    NO_ALLOCATABLE_ACCELERATORS = "NoAllocatableAccelerators"


ACCELERATORS_UNAVAILABLE: Final = "AcceleratorsUnavailable"
"""The condition, True only while it holds, of an admitted actor or gang instance whose pods
are not ready and whose flavor's nodes advertise none of an accelerator it asks for
(`nodes.lacking_accelerators`); absent otherwise."""


@dataclasses.dataclass(frozen=True)
class Problem:
    """Something the actor needs that is not there; it leaves the actor Degraded."""

    reason: Reason
    message: str


def secret_problems(
    namespace: str, secret: str, secret_keys: Collection[str] | None
) -> list[Problem]:
    """What the broker Secret `namespace/secret` lacks, given its keys (None: no such Secret)."""
    if secret_keys is None:
        return [
            Problem(
                Reason.SECRET_NOT_FOUND,
                f"Secret {namespace}/{secret} not found: create it with keys"
                f" {BROKER_AMQP_URL_KEY} and {BROKER_MANAGEMENT_URL_KEY}",
            )
        ]
    return [
        Problem(Reason.SECRET_KEY_MISSING, f"Secret {namespace}/{secret} has no key {key}: add it")
        for key in (BROKER_AMQP_URL_KEY, BROKER_MANAGEMENT_URL_KEY)
        if key not in secret_keys
    ]


RFC3339: Final = "%Y-%m-%dT%H:%M:%SZ"
"""How a condition's `lastTransitionTime` is written (UTC, whole seconds)."""


def _rfc3339(now: datetime) -> str:
    return now.astimezone(UTC).strftime(RFC3339)


def conditions_at(
    now: datetime,
    known: Sequence[Condition] | None,
    kind: type[C] = Condition,  # type: ignore[assignment]
    *,
    generation: int | None,
) -> Callable[..., C]:
    """A maker of conditions (of `kind`: `Condition`, or a kind's subtype of it) at `now` that
    keep the transition time of `known`'s unchanged ones: `make(type, reason, message,
    is_true=...)`. Each carries `generation` (the CR's metadata.generation it was set from) as
    its `observedGeneration`, as metav1.Condition does."""
    at = _rfc3339(now)
    previous = {c.type: c for c in known or ()}

    def make(type_: str, reason: Reason, message: str, *, is_true: bool) -> C:
        status: Literal["True", "False"] = "True" if is_true else "False"
        before = previous.get(type_)
        since = at
        if before is not None and before.status == status and before.last_transition_time:
            since = before.last_transition_time
        return kind(
            type=type_,
            status=status,
            reason=str(reason),
            message=message,
            last_transition_time=since,
            observed_generation=generation,
        )

    return make


def newly_true(type_: str, known: Sequence[Condition] | None, now: Sequence[C] | None) -> C | None:
    """The condition `type_` of `now` if it is True and says something `known`'s did not (True
    now, or for another reason): worth a Warning Event. None otherwise."""
    before = {c.type: c for c in known or ()}.get(type_)
    for condition in now or ():
        if condition.type != type_ or condition.status != "True":
            continue
        if before is None or (before.status, before.reason) != ("True", condition.reason):
            return condition
    return None


def generation_of(metadata: Mapping[str, Any]) -> int | None:
    """A CR's `metadata.generation` (None: not set, as in a CR never stored)."""
    generation = metadata.get("generation")
    return generation if isinstance(generation, int) else None
