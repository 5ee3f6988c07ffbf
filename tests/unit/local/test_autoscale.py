"""KEDA's queue-depth rule, step by step."""

from __future__ import annotations

import pytest

from asya.actor import ActorOptions, Scaling
from asya.local.autoscale import ScaleState, next_scale


def rule(**options) -> Scaling:
    """The scaling of an actor declared with `options` (the rest at their defaults)."""
    return ActorOptions(**options).scaling


RULE = rule(min_replicas=0, max_replicas=10, queue_length=5, activation=0, cooldown_s=60)


@pytest.mark.parametrize(
    ("scaling", "replicas", "depth", "expected"),
    [
        pytest.param(RULE, 0, 0, 0, id="idle-stays-at-zero"),
        pytest.param(RULE, 0, 1, 1, id="one-message-activates"),
        pytest.param(RULE, 0, 11, 3, id="ceil-of-depth-over-queue-length"),
        pytest.param(RULE, 1, 500, 10, id="clamped-to-max"),
        pytest.param(rule(min_replicas=2, queue_length=5), 0, 0, 2, id="min-kept-when-idle"),
        pytest.param(rule(min_replicas=2, queue_length=5), 0, 1, 2, id="min-when-active"),
        pytest.param(rule(activation=10, queue_length=5), 0, 10, 0, id="at-activation-stays"),
        pytest.param(rule(activation=10, queue_length=5), 0, 11, 3, id="above-activation"),
        pytest.param(RULE, 2, 40, 8, id="scales-up-at-once"),
    ],
)
def test_desired_replicas(scaling, replicas, depth, expected):
    assert next_scale(scaling, ScaleState(replicas), depth, now_s=100.0).replicas == expected


def test_an_idle_actor_keeps_its_workers_until_the_cooldown_then_goes_to_zero():
    state = next_scale(RULE, ScaleState(0), 10, now_s=0.0)

    state = next_scale(RULE, state, 0, now_s=59.0)
    assert state.replicas == 2
    state = next_scale(RULE, state, 0, now_s=60.0)
    assert state.replicas == 0


def test_scaling_down_between_non_zero_counts_waits_for_the_cooldown():
    state = next_scale(RULE, ScaleState(0), 50, now_s=0.0)
    assert state.replicas == 10

    state = next_scale(RULE, state, 5, now_s=1.0)
    assert state.replicas == 10
    state = next_scale(RULE, state, 5, now_s=60.0)
    assert state.replicas == 10
    state = next_scale(RULE, state, 5, now_s=61.0)
    assert state.replicas == 1


def test_a_burst_during_the_down_wait_cancels_it():
    state = next_scale(RULE, ScaleState(0), 50, now_s=0.0)
    state = next_scale(RULE, state, 5, now_s=1.0)

    state = next_scale(RULE, state, 50, now_s=30.0)
    state = next_scale(RULE, state, 5, now_s=62.0)

    assert state.replicas == 10
