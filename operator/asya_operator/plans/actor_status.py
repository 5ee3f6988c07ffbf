"""An AsyncActor's status: replicas, the selector the HPA needs, and conditions with reasons.

Pure: the actor, the Deployment's observed status and the problems found (a missing Secret or
flavor, its name another's: named) in; the status to write out, typed (`AsyncActorStatus`),
as a `StatusPatch` of the fields its writer owns. The time a condition changed is an input
(`now`), and a condition whose status did not change keeps the time it had.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from asya.errors import AdmissionError
from asya_operator.api.actor import AsyncActor, AsyncActorStatus
from asya_operator.api.flavor import ResourceFlavor
from asya_operator.api.metadata import actor_name, selector_string
from asya_operator.api.template import Condition
from asya_operator.plans import kueue
from asya_operator.plans.conditions import (
    ACCELERATORS_UNAVAILABLE,
    RFC3339,
    Problem,
    Reason,
    conditions_at,
    generation_of,
    newly_true,
    secret_problems,
)
from asya_operator.plans.names import Claim, names_taken
from asya_operator.plans.nodes import Node, Shortage, lacking_accelerators
from asya_operator.plans.pods import placement_flavor
from asya_operator.plans.pools import DEFAULT_POOL_LABEL, gpus_per_replica
from asya_operator.plans.quota import GPU_RESOURCE, requests_of
from asya_operator.plans.scaling import desired_replicas, running_replicas
from asya_operator.plans.statuses import StatusPatch
from asya_operator.plans.workloads import ActorAdmission

ADMISSION_CONDITIONS = ("QuotaReserved", "Admitted", "Preempted", ACCELERATORS_UNAVAILABLE)
"""The conditions an actor with a pool has besides Ready, Scaling and Degraded: written by the
admission pass, kept as they are by everything else (AcceleratorsUnavailable but once every
replica is ready: nothing waits for a node then)."""


def find_problems(
    actor: AsyncActor,
    namespace: str,
    *,
    secret_keys: Collection[str] | None,
    flavor: ResourceFlavor | None,
    keepers: Mapping[str, Claim],
    pool_required: bool = False,
) -> list[Problem]:
    """What `actor` needs and lacks: its broker Secret (or a key of it), its flavor, with
    `pool_required` (the operator's `require_pool_for_accelerators`) a pool if it asks for GPUs,
    and its name (`names.names_taken`: no ActorGroup's member keeps it).

    `actor` has its effective pool (`pools.with_effective_pool`); `secret_keys` are the keys of
    the Secret `spec.broker.secretName` (None: no such Secret); `flavor` is the ResourceFlavor
    the actor is placed by (`placement_flavor`) as found (None: not found, or none);
    `keepers` who keeps each actor name of the namespace (`names.name_keepers`).
    """
    problems = secret_problems(namespace, actor.spec.broker.secret_name, secret_keys)
    gpus = gpus_per_replica(actor)
    if pool_required and gpus and actor.spec.pool is None:
        problems.append(
            Problem(
                Reason.POOL_REQUIRED,
                f"asks for {gpus} {GPU_RESOURCE} per replica and has no pool, and this operator"
                " runs GPUs only under a pool's quota: set spec.pool, or label namespace"
                f" {namespace} {DEFAULT_POOL_LABEL}=<pool>",
            )
        )
    wanted = placement_flavor(actor)
    if wanted is not None and flavor is None:
        problems.append(
            Problem(
                Reason.FLAVOR_NOT_FOUND,
                f"ResourceFlavor {wanted} not found: create it or change spec.flavor",
            )
        )
    taken = names_taken(actor, namespace, keepers)
    problems += [Problem(Reason.NAME_TAKEN, why) for why in taken]
    return problems


def broker_unreachable(error: object) -> Problem:
    """The broker refused or did not answer when the actor's queues were declared."""
    return Problem(Reason.BROKER_UNREACHABLE, f"queues not declared: {error}")


def apply_refused(error: object) -> Problem:
    """The API server refused one of the actor's objects as invalid."""
    return Problem(Reason.APPLY_REFUSED, f"objects not applied: {error}")


_KEPT: Final = (Reason.BROKER_UNREACHABLE, Reason.APPLY_REFUSED)


def kept_problems(actor: AsyncActor) -> list[Problem]:
    """The problems only the reconcile's own writes find (the broker unreachable, an object the
    API server refused), as `actor`'s status last recorded them: every other writer keeps them,
    until the reconcile's apply and declare succeed."""
    known = (actor.status.conditions if actor.status else None) or ()
    return [
        Problem(Reason(c.reason), c.message or "")
        for c in known
        if c.type == "Degraded" and c.status == "True" and c.reason in _KEPT
    ]


def newly_degraded(actor: AsyncActor, patch: StatusPatch[AsyncActorStatus]) -> Condition | None:
    """The Degraded condition of `patch` if it says something `actor`'s did not (Degraded
    now, or for another reason): a Warning Event to post. None otherwise."""
    known = actor.status.conditions if actor.status else None
    return newly_true("Degraded", known, patch.status.conditions)


_OBSERVED: Final = frozenset({"replicas", "ready_replicas", "selector", "conditions"})
"""What the actor's own writers (its reconcile, its Deployment's and Secret's followers) own;
`observed_generation` too once there is one. `admitted_replicas` and `admitted_flavor` are the
admission pass's alone, so a status written from an actor read before a pass never puts back
an old count."""


def plan_status(
    actor: AsyncActor,
    deployment_status: Mapping[str, Any] | None,
    problems: Sequence[Problem],
    *,
    observed_generation: int | None,
    now: datetime,
    quota: bool = True,
) -> StatusPatch[AsyncActorStatus]:
    """The AsyncActor's status, from its Deployment's `status` (None: no Deployment yet).

    `observed_generation` is the generation whose objects are applied and whose queues are
    declared (None: none yet); it is written as `observedGeneration`. Conditions: `Degraded`
    (True while something the actor needs is missing, the reason and message naming it),
    `Ready` (True once the actor's own generation is applied and its queues declared, and every
    desired replica is ready or none is desired: a client may send to it then), `Scaling`
    (True while the Deployment's replicas move toward the desired number; False, held, while
    Degraded).
    """
    observed = deployment_status or {}
    replicas = int(observed.get("replicas", 0))
    ready = int(observed.get("readyReplicas", 0))
    # With a pool, what runs is what is admitted; the admission conditions say the rest. With
    # Kueue admitting (`quota` False), every desired replica runs, some gated until admitted.
    desired = running_replicas(actor, quota=quota)
    generation = generation_of(actor.metadata)
    known = actor.status.conditions if actor.status else None
    condition = conditions_at(now, known, Condition, generation=generation)

    if problems:
        first = problems[0]
        messages = "; ".join(p.message for p in problems)
        degraded = condition("Degraded", first.reason, messages, is_true=True)
        ready_now = condition("Ready", first.reason, f"not ready: {first.message}", is_true=False)
        scaling = condition("Scaling", first.reason, f"held: {first.message}", is_true=False)
    else:
        degraded = condition("Degraded", Reason.AS_EXPECTED, "nothing missing", is_true=False)
        if observed_generation != generation:
            pending = f"generation {generation} not yet applied: objects and queues in the making"
            ready_now = condition("Ready", Reason.RECONCILING, pending, is_true=False)
        elif desired == 0:
            idle = "no replicas wanted: the queue is idle"
            ready_now = condition("Ready", Reason.SCALED_TO_ZERO, idle, is_true=True)
        else:
            counts = f"{ready} of {desired} replicas ready"
            is_ready = ready >= desired
            reason = Reason.REPLICAS_READY if is_ready else Reason.REPLICAS_NOT_READY
            ready_now = condition("Ready", reason, counts, is_true=is_ready)
        if replicas > desired:
            moving = f"{replicas} replicas, {desired} wanted"
            scaling = condition("Scaling", Reason.SCALING_DOWN, moving, is_true=True)
        elif ready < desired:
            moving = f"{ready} ready, {desired} wanted"
            scaling = condition("Scaling", Reason.SCALING_UP, moving, is_true=True)
        else:
            steady = f"{desired} replicas, as wanted"
            scaling = condition("Scaling", Reason.STABLE, steady, is_true=False)

    status = AsyncActorStatus(
        replicas=replicas,
        ready_replicas=ready,
        selector=selector_string(actor_name(actor)),
        conditions=[
            ready_now,
            scaling,
            degraded,
            *_admission_conditions_kept(actor, all_ready=ready >= desired),
        ],
        observed_generation=observed_generation,
    )
    owned = _OBSERVED if observed_generation is None else _OBSERVED | {"observed_generation"}
    if left_its_pool(actor):  # what it held there is no longer its (left unset: cleared)
        owned = owned | {"admitted_replicas", "admitted_flavor"}
    return StatusPatch.of(status, owned)


def left_its_pool(actor: AsyncActor) -> bool:
    """Whether the actor has no pool (its own or its namespace's) and its status still holds
    replicas admitted in one."""
    return (
        actor.spec.pool is None
        and actor.status is not None
        and bool(actor.status.admitted_replicas)
    )


def observed_generation(actor: AsyncActor) -> int | None:
    """The generation `actor`'s status says is applied, queues and all (None: none yet)."""
    return None if actor.status is None else actor.status.observed_generation


def plan_refused_status(message: str, *, now: datetime) -> StatusPatch[AsyncActorStatus]:
    """The status of an AsyncActor whose stored spec the operator refuses (`message` says what
    to fix): Degraded, nothing applied, so no observedGeneration."""
    # The stored spec did not decode: the generation it was refused at is not known here.
    condition = conditions_at(now, None, Condition, generation=None)
    conditions = [
        condition("Ready", Reason.INVALID_SPEC, f"not ready: {message}", is_true=False),
        condition("Scaling", Reason.INVALID_SPEC, f"held: {message}", is_true=False),
        condition("Degraded", Reason.INVALID_SPEC, message, is_true=True),
    ]
    return StatusPatch.of(AsyncActorStatus(conditions=conditions), {"conditions"})


def _admission_conditions_kept(actor: AsyncActor, *, all_ready: bool) -> list[Condition]:
    if actor.spec.pool is None or actor.status is None:
        return []
    return [
        c
        for c in actor.status.conditions or ()
        if c.type in ADMISSION_CONDITIONS and not (all_ready and c.type == ACCELERATORS_UNAVAILABLE)
    ]


def find_accelerator_shortage(
    actor: AsyncActor,
    admission: ActorAdmission,
    flavor: ResourceFlavor | None,
    nodes: Sequence[Node] | None,
) -> Shortage | None:
    """Why `actor`'s admitted replicas may not start: its admitted `flavor`'s nodes advertise
    none of an accelerator it asks for (`nodes.lacking_accelerators`). None when they do,
    when every replica it runs is ready, or when it cannot be told: nothing admitted, the
    flavor not found, the Nodes not readable (`nodes` None)."""
    runs = min(admission.admitted, desired_replicas(actor))
    ready = (actor.status.ready_replicas if actor.status else None) or 0
    if nodes is None or flavor is None or runs == 0 or ready >= runs:
        return None
    try:
        requests = requests_of(actor.spec.resources)
    except AdmissionError:  # a quantity admission refuses says so itself
        return None
    return lacking_accelerators(flavor, nodes, requests)


def plan_admission_status(
    actor: AsyncActor,
    admission: ActorAdmission,
    *,
    now: datetime,
    shortage: Shortage | None = None,
) -> StatusPatch[AsyncActorStatus]:
    """The status fields the admission pass writes for an actor with a pool: the admitted
    replicas and flavor, and QuotaReserved, Admitted and Preempted; AcceleratorsUnavailable
    while there is a `shortage` (`find_accelerator_shortage`), naming the flavor (the other
    conditions are kept as they are: the list is written whole)."""
    desired = desired_replicas(actor)
    known = actor.status.conditions if actor.status is not None else None
    previous = {c.type: c for c in known or ()}
    pool, admitted = actor.spec.pool, admission.admitted
    condition = conditions_at(now, known, Condition, generation=generation_of(actor.metadata))

    waiting = admission.message or f"{admitted} of {desired} replicas admitted"
    if admitted > 0:
        borrowed = f", borrowing from pool {pool}'s cohort" if admission.borrowing else ""
        held = f"{admitted} replicas hold quota in flavor {admission.flavor} of pool {pool}"
        if admission.accelerator_fallback is not None:
            # Replicas asking for no accelerator on a flavor that has them: said, not hidden.
            held += f", though they ask for no accelerator ({admission.accelerator_fallback})"
        reserved = condition("QuotaReserved", Reason.QUOTA_RESERVED, held + borrowed, is_true=True)
    else:
        reserved = condition("QuotaReserved", Reason.PENDING, waiting, is_true=False)
    if admitted >= desired:
        whole = f"{admitted} of {desired} replicas admitted"
        admitted_now = condition("Admitted", Reason.ADMITTED, whole, is_true=True)
    else:
        admitted_now = condition("Admitted", Reason.PENDING, waiting, is_true=False)
    if admission.preempted_by is not None:
        by = f"replicas preempted by {admission.preempted_by}: {waiting}"
        preempted = condition("Preempted", Reason.PREEMPTED, by, is_true=True)
    elif admitted >= desired or "Preempted" not in previous:
        preempted = condition("Preempted", Reason.NOT_PREEMPTED, "none preempted", is_true=False)
    else:
        preempted = previous["Preempted"]
    others = [c for c in known or () if c.type not in ADMISSION_CONDITIONS]
    lacking = []
    if shortage is not None:
        reason = Reason.NO_ALLOCATABLE_ACCELERATORS
        lacking.append(condition(ACCELERATORS_UNAVAILABLE, reason, shortage.message, is_true=True))
    status = AsyncActorStatus(
        admitted_replicas=admitted,
        admitted_flavor=admission.flavor,
        conditions=[*others, reserved, admitted_now, preempted, *lacking],
    )
    return StatusPatch.of(status, {"admitted_replicas", "admitted_flavor", "conditions"})


def pending_since(patch: StatusPatch[AsyncActorStatus]) -> float | None:
    """When (Unix time) the Admitted condition of `patch` last turned False: since then the
    actor has had replicas waiting for quota. None while all are admitted."""
    for condition in patch.status.conditions or ():
        if condition.type == "Admitted" and condition.status == "False":
            stamp = datetime.strptime(str(condition.last_transition_time), RFC3339)
            return stamp.replace(tzinfo=UTC).timestamp()
    return None


def status_seen_since(
    actor: AsyncActor,
    deployment_status: Mapping[str, Any] | None,
    problems: Sequence[Problem],
    *,
    now: datetime,
    quota: bool = True,
) -> StatusPatch[AsyncActorStatus]:
    """The actor's status as anyone but its reconcile writes it: the generation observed stays
    the one the reconcile applied (objects and queues), not one it has yet to see, so `Ready`
    waits for the reconcile; so does a broker it found unreachable (`kept_problems`). A kept
    problem that `problems` finds again is replaced by its new occurrence, never joined to it:
    a lasting failure retried every `recheck_s` leaves one message, not one more per retry."""
    found = {p.reason for p in problems}
    kept = [p for p in kept_problems(actor) if p.reason not in found]
    return plan_status(
        actor,
        deployment_status,
        [*problems, *kept],
        observed_generation=observed_generation(actor),
        now=now,
        quota=quota,
    )


def kueue_admission(
    actor: AsyncActor, workloads: Sequence[Mapping[str, Any]], missing: str | None
) -> ActorAdmission:
    """An actor's replicas as Kueue admitted them (the operator's `admission: kueue`): its
    pods' Workloads (`kueue.actor_workloads`) that are admitted, the flavor of the first, and
    Kueue's words for one that waits (or `missing`: why none can be read)."""
    desired = desired_replicas(actor)
    admitted = [w for w in workloads if kueue.is_admitted(w)]
    waiting = [w for w in workloads if not kueue.is_admitted(w)]
    count = min(desired, len(admitted))
    flavors = [f for w in admitted for f in kueue.flavors_of(w)]
    message = None
    if count < desired:
        why = missing or (kueue.waiting_words(waiting[0]) if waiting else "no Workload yet")
        message = f"{count} of {desired} replicas admitted by Kueue; {why}"
    return ActorAdmission(
        admitted=count,
        flavor=flavors[0] if flavors and count else None,
        borrowing=False,
        message=message,
        preempted_by=None,
    )
