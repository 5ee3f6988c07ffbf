"""Retry delays on RabbitMQ: rounded down to the ladder, so a policy's cap is never exceeded."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asya.transport.rabbitmq import DELAY_LADDER_MS, delay_bucket_ms


@pytest.mark.parametrize(
    ("requested_ms", "waits_ms"),
    [(4_000, 3_000), (5_000, 5_000), (60_000, 60_000), (59_999, 45_000), (49, 20), (5, 0)],
    ids=["4s-waits-3s", "exact-step", "one-minute", "just-under-a-step", "49ms", "under-10ms"],
)
def test_a_delay_is_rounded_down_to_the_ladder(requested_ms, waits_ms):
    assert delay_bucket_ms(requested_ms) == waits_ms


@given(st.integers(min_value=0, max_value=10 * 3_600_000))
def test_no_delay_is_ever_longer_than_requested(requested_ms):
    waits = delay_bucket_ms(requested_ms)

    assert waits <= requested_ms
    assert waits == 0 or waits in DELAY_LADDER_MS
