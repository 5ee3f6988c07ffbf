"""A misspelt `RetryPolicy` field fails like a misspelt `@actor` option: naming the closest one."""

from __future__ import annotations

import pytest

from asya import ActorDefinitionError, RetryPolicy


def test_a_misspelt_retry_field_names_the_closest_valid_one():
    with pytest.raises(ActorDefinitionError) as caught:
        RetryPolicy(max_attempt=3)  # type: ignore[call-arg]

    assert str(caught.value) == (
        "RetryPolicy: unknown field 'max_attempt'; did you mean 'max_attempts'? (valid fields:"
        " base_delay_ms, factor, jitter, max_attempts, max_delay_ms, never_retry, retry_on,"
        " retry_timeouts)"
    )


def test_an_unknown_retry_field_with_no_close_match_lists_the_valid_ones():
    with pytest.raises(ActorDefinitionError, match=r"unknown field 'colour' \(valid fields: base_"):
        RetryPolicy(colour="red")  # type: ignore[call-arg]


def test_positional_retry_arguments_are_refused_with_the_field_names():
    with pytest.raises(ActorDefinitionError, match=r"keyword arguments only \(base_delay_ms, "):
        RetryPolicy(3)  # type: ignore[call-arg]


def test_a_valid_policy_keeps_the_fields_it_was_given():
    policy = RetryPolicy(max_attempts=5, jitter=0.0)

    assert (policy.max_attempts, policy.jitter, policy.base_delay_ms) == (5, 0.0, 1000)
