"""The frames' own contract: the actor's options cross the socket whole. Which protocol
versions a sidecar serves: test_protocol_window.py."""

from __future__ import annotations

import msgspec

from asya import RetryPolicy, actor
from asya.actor import spec_of
from asya.envelope import Limits
from asya.runtime.frames import (
    PROTOCOL,
    Pong,
    encode_frame,
    frame_bounds,
)


def test_a_pong_carries_every_option_of_the_actor_as_declared():
    @actor(
        timeout_s=7,
        concurrency=3,
        batch=8,
        batch_wait_ms=25,
        retry=RetryPolicy(max_attempts=5, base_delay_ms=50, factor=3.0, jitter=0.0),
    )
    def scored(docs):
        return docs

    spec = spec_of(scored)
    assert spec is not None
    pong = Pong(1, spec.config, 3, frame_bounds(Limits(), 8), PROTOCOL)

    decoded = msgspec.msgpack.decode(encode_frame(pong)[4:], type=Pong)

    assert decoded.actor == spec.config
    assert (
        decoded.actor.retry
        == RetryPolicy(max_attempts=5, base_delay_ms=50, factor=3.0, jitter=0.0).schedule
    )
