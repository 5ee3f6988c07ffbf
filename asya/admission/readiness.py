"""What happens to an admitted gang that does not become ready (Kueue's waitForPodsReady).

A gang admitted at `t` has `timeout_s` to become fully ready. If it does not, it is evicted
whole — its quota released — and may be requeued after a backoff: the n-th eviction waits
`backoff_base_s * 2**(n-1)`, capped at `backoff_max_s`. After more than `backoff_limit`
evictions it is deactivated and stays out until reactivated, which resets the count.
Pure: `now` (seconds, monotonic) is an argument; the caller carries out the action.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class GangPhase(enum.StrEnum):
    PENDING = "Pending"
    """Waiting for admission."""
    WAITING_FOR_READY = "WaitingForReady"
    """Admitted; not all members ready yet."""
    READY = "Ready"
    BACKING_OFF = "BackingOff"
    """Evicted; requeued once `requeue_at` is reached."""
    DEACTIVATED = "Deactivated"


class GangAction(enum.StrEnum):
    NONE = "None"
    EVICT = "Evict"
    """Release the gang's quota and stop all its members."""
    REQUEUE = "Requeue"
    """Put the gang back in its pool's queue."""
    DEACTIVATE = "Deactivate"
    """Release its quota and keep it out until a person reactivates it."""


@dataclass(frozen=True, kw_only=True)
class ReadinessPolicy:
    timeout_s: float = 300.0
    """Time an admitted gang has to become fully ready."""
    backoff_base_s: float = 60.0
    """Wait before the first requeue."""
    backoff_max_s: float = 3600.0
    """No requeue waits longer than this."""
    backoff_limit: int | None = None
    """Evictions allowed before deactivation; None = requeue forever."""


@dataclass(frozen=True, kw_only=True)
class GangState:
    phase: GangPhase = GangPhase.PENDING
    admitted_at: float | None = None
    evictions: int = 0
    requeue_at: float | None = None


def on_admitted(state: GangState, now: float) -> GangState:
    """The gang was just admitted: its readiness clock starts."""
    return replace(state, phase=GangPhase.WAITING_FOR_READY, admitted_at=now, requeue_at=None)


def requeue_delay_s(policy: ReadinessPolicy, evictions: int) -> float:
    """Backoff before requeueing after the `evictions`-th eviction (1-based)."""
    return float(min(policy.backoff_max_s, policy.backoff_base_s * 2 ** (evictions - 1)))


def step(
    state: GangState, policy: ReadinessPolicy, *, ready: bool, now: float
) -> tuple[GangState, GangAction]:
    """Advance the gang's state given whether all its members are ready at `now`."""
    if state.phase is GangPhase.WAITING_FOR_READY:
        if ready:
            return replace(state, phase=GangPhase.READY), GangAction.NONE
        assert state.admitted_at is not None
        if now - state.admitted_at < policy.timeout_s:
            return state, GangAction.NONE
        evictions = state.evictions + 1
        if policy.backoff_limit is not None and evictions > policy.backoff_limit:
            gone = GangState(phase=GangPhase.DEACTIVATED, evictions=evictions)
            return gone, GangAction.DEACTIVATE
        waiting = GangState(
            phase=GangPhase.BACKING_OFF,
            evictions=evictions,
            requeue_at=now + requeue_delay_s(policy, evictions),
        )
        return waiting, GangAction.EVICT
    if state.phase is GangPhase.READY and not ready:
        # Once ready, a member failing is the workload's own business (restarts), not admission's.
        return state, GangAction.NONE
    if state.phase is GangPhase.BACKING_OFF:
        assert state.requeue_at is not None
        if now >= state.requeue_at:
            return replace(state, phase=GangPhase.PENDING, requeue_at=None), GangAction.REQUEUE
    return state, GangAction.NONE


def reactivate(state: GangState) -> GangState:
    """A person put a deactivated gang back: it queues again with a fresh eviction count."""
    return GangState(phase=GangPhase.PENDING)
