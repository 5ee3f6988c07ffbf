"""A gang admitted but never ready is evicted whole, requeued with backoff, then deactivated."""

from __future__ import annotations

import pytest

from asya.admission.readiness import (
    GangAction,
    GangPhase,
    GangState,
    ReadinessPolicy,
    on_admitted,
    reactivate,
    requeue_delay_s,
    step,
)

POLICY = ReadinessPolicy(timeout_s=300, backoff_base_s=60, backoff_max_s=600, backoff_limit=3)


def test_a_gang_that_becomes_ready_in_time_stays():
    state = on_admitted(GangState(), now=0)

    state, action = step(state, POLICY, ready=True, now=299)

    assert (state.phase, action) == (GangPhase.READY, GangAction.NONE)


def test_before_its_timeout_a_gang_that_is_not_ready_is_left_alone():
    state = on_admitted(GangState(), now=0)

    after, action = step(state, POLICY, ready=False, now=299.9)

    assert (after, action) == (state, GangAction.NONE)


def test_at_its_timeout_an_unready_gang_is_evicted_and_waits_the_base_backoff():
    state = on_admitted(GangState(), now=100)

    state, action = step(state, POLICY, ready=False, now=400)

    assert action is GangAction.EVICT
    assert (state.phase, state.evictions, state.requeue_at) == (GangPhase.BACKING_OFF, 1, 460)


def test_a_backing_off_gang_is_requeued_when_its_wait_is_over():
    waiting = GangState(phase=GangPhase.BACKING_OFF, evictions=1, requeue_at=460)

    early, nothing = step(waiting, POLICY, ready=False, now=459)
    state, action = step(waiting, POLICY, ready=False, now=460)

    assert nothing is GangAction.NONE
    assert early == waiting
    assert (state.phase, action) == (GangPhase.PENDING, GangAction.REQUEUE)


@pytest.mark.parametrize(
    ("evictions", "delay_s"), [(1, 60), (2, 120), (3, 240), (4, 480), (5, 600), (9, 600)]
)
def test_the_backoff_doubles_up_to_its_cap(evictions, delay_s):
    assert requeue_delay_s(POLICY, evictions) == delay_s


def test_past_the_retry_limit_a_gang_is_deactivated_and_reactivation_starts_afresh():
    state = GangState(phase=GangPhase.PENDING, evictions=3)
    state = on_admitted(state, now=0)

    state, action = step(state, POLICY, ready=False, now=300)
    again = reactivate(state)

    assert (state.phase, action) == (GangPhase.DEACTIVATED, GangAction.DEACTIVATE)
    assert step(state, POLICY, ready=False, now=10_000) == (state, GangAction.NONE)
    assert again == GangState(phase=GangPhase.PENDING, evictions=0)


def test_without_a_limit_a_gang_is_requeued_for_ever():
    state = GangState(evictions=50)
    state = on_admitted(state, now=0)

    state, action = step(state, ReadinessPolicy(timeout_s=1), ready=False, now=1)

    assert action is GangAction.EVICT
    assert state.evictions == 51
