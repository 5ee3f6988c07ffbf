"""A misspelt `RetryPolicy` field fails like a misspelt `@actor` option: naming the closest one;
a retry setting given to `@actor` points at the policy; `retry_on` takes what `except` takes."""

from __future__ import annotations

import pytest

from asya import ActorDefinitionError, RetryPolicy, actor
from asya.actor import spec_of
from asya.retry import is_retryable


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


@pytest.mark.parametrize(
    ("keyword", "value", "fix"),
    [
        pytest.param("max_retries", 3, "retry=RetryPolicy(max_attempts=4)", id="max_retries"),
        pytest.param("retries", 2, "retry=RetryPolicy(max_attempts=3)", id="retries"),
        pytest.param("retry_count", 0, "retry=RetryPolicy(max_attempts=1)", id="retry_count"),
        pytest.param("max_attempts", 5, "retry=RetryPolicy(max_attempts=5)", id="field"),
        pytest.param("attempts", 4, "retry=RetryPolicy(max_attempts=4)", id="attempts"),
        pytest.param("max_tries", 3, "retry=RetryPolicy(max_attempts=3)", id="max_tries"),
        pytest.param("backoff", 2.0, "retry=RetryPolicy(base_delay_ms=MS)", id="backoff"),
        pytest.param("retry_delay_ms", 500, "retry=RetryPolicy(base_delay_ms=500)", id="delay-ms"),
        pytest.param("backoff_s", 1.5, "retry=RetryPolicy(base_delay_ms=1500)", id="backoff-s"),
        pytest.param("retry_on", ValueError, "retry=RetryPolicy(retry_on=ValueError)", id="on"),
    ],
)
def test_a_retry_shaped_option_points_at_the_retry_policy_not_at_a_scaling_option(
    keyword, value, fix
):
    with pytest.raises(ActorDefinitionError) as caught:
        actor(**{keyword: value})(lambda doc: doc)

    message = str(caught.value)
    assert f"unknown option '{keyword}'; " in message
    assert fix in message
    assert "max_replicas" not in message


def test_max_retries_says_that_max_attempts_counts_the_first_call():
    with pytest.raises(ActorDefinitionError) as caught:
        actor(max_retries=3)(lambda doc: doc)

    assert str(caught.value).endswith(
        "unknown option 'max_retries'; retries are set by the retry policy, whose max_attempts"
        " counts the first call too: for 3 retries write retry=RetryPolicy(max_attempts=4)"
    )


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        pytest.param(ValueError, (ValueError,), id="a-class"),
        pytest.param((ValueError, KeyError), (ValueError, KeyError), id="a-tuple"),
        pytest.param((), (), id="none"),
    ],
)
def test_retry_on_takes_a_class_or_a_tuple_as_except_does(given, kept):
    policy = RetryPolicy(retry_on=given, never_retry=given)

    assert (policy.retry_on, policy.never_retry) == (kept, kept)


def test_a_policy_given_one_class_retries_it_and_nothing_else():
    @actor(retry=RetryPolicy(retry_on=ValueError, never_retry=KeyError))
    def flaky(doc):
        return doc

    policy = spec_of(flaky).retry

    assert is_retryable(policy, ValueError("flaky"))
    assert not is_retryable(policy, TypeError("other"))
    assert policy == RetryPolicy(retry_on=(ValueError,), never_retry=(KeyError,))


@pytest.mark.parametrize(
    ("given", "message"),
    [
        pytest.param(
            ValueError("x"),
            "retry_on takes an exception class or a tuple of them, as `except` does; got the"
            " instance ValueError('x'): write retry_on=ValueError",
            id="an-instance",
        ),
        pytest.param(
            [ValueError, KeyError],
            "got a list: write retry_on=(ValueError, KeyError)",
            id="a-list",
        ),
        pytest.param(
            "ValueError",
            "got the string 'ValueError': write the class, retry_on=ValueError",
            id="a-name",
        ),
        pytest.param(int, "int is not an exception class", id="not-an-exception"),
        pytest.param(None, "got None: write retry_on=() for none", id="none"),
        pytest.param((ValueError, 3), "retry_on must hold exception classes, got 3", id="in-tuple"),
    ],
)
def test_anything_else_as_retry_on_is_an_error_naming_the_fix(given, message):
    with pytest.raises(ActorDefinitionError) as caught:
        RetryPolicy(retry_on=given)

    assert message in str(caught.value)
