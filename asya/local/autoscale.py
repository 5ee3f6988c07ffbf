"""How many workers an actor should have: KEDA's queue-depth rule, as a pure function.

KEDA's RabbitMQ scaler with mode QueueLength: an actor at zero is activated when the depth
(ready plus unacked) is above `activation`; while active the target is
`ceil(depth / queue_length)` clamped to `[max(min_replicas, 1), max_replicas]`; once the
depth has stayed at or below `activation` for `cooldown_s`, it goes back to `min_replicas`
(zero included). Scaling up is immediate. Scaling down between non-zero counts waits for the
same cooldown (standing in for the HPA's stabilization window), so workers do not thrash.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from asya.actor import Scaling


@dataclass(frozen=True)
class ScaleState:
    """What the rule remembers between polls."""

    replicas: int
    last_active_s: float | None = None
    """When the depth was last above `activation` (monotonic seconds)."""
    lower_since_s: float | None = None
    """Since when a lower count than `replicas` has been asked for."""


def next_scale(scaling: Scaling, state: ScaleState, depth: int, now_s: float) -> ScaleState:
    """The state after one poll that saw `depth` messages at `now_s`."""
    active = depth > scaling.activation
    if not active:
        if state.replicas > 0 and not _cooled(scaling, state.last_active_s, now_s):
            return ScaleState(state.replicas, state.last_active_s, None)
        return ScaleState(scaling.min_replicas, state.last_active_s, None)
    floor = max(scaling.min_replicas, 1)
    wanted = min(max(math.ceil(depth / scaling.queue_length), floor), scaling.max_replicas)
    if wanted >= state.replicas:
        return ScaleState(wanted, now_s, None)
    lower_since = now_s if state.lower_since_s is None else state.lower_since_s
    if now_s - lower_since >= scaling.cooldown_s:
        return ScaleState(wanted, now_s, None)
    return ScaleState(state.replicas, now_s, lower_since)


def _cooled(scaling: Scaling, last_active_s: float | None, now_s: float) -> bool:
    return last_active_s is None or now_s - last_active_s >= scaling.cooldown_s
