"""Retry policy: which errors retry, and how long between attempts."""

from __future__ import annotations

import pytest

from asya.envelope import Reason
from asya.errors import ActorDefinitionError, PermanentError
from asya.outcome import Failure
from asya.retry import RetryPolicy, backoff_ms, is_retryable, next_delay_ms
from tests.factories import rng


@pytest.mark.parametrize(
    ("attempt", "expected_ms"),
    [(1, 1000), (2, 2000), (3, 4000), (4, 8000), (7, 60_000), (30, 60_000)],
)
def test_without_jitter_a_1s_base_doubles_up_to_the_cap(attempt, expected_ms):
    policy = RetryPolicy(base_delay_ms=1000, factor=2.0, max_delay_ms=60_000, jitter=0.0)

    assert backoff_ms(policy, attempt, rng()) == expected_ms


def test_jitter_only_shortens_a_delay_and_by_at_most_its_fraction():
    policy = RetryPolicy(base_delay_ms=1000, jitter=0.25, max_delay_ms=60_000)
    random_source = rng()

    delays = [backoff_ms(policy, 3, random_source) for _ in range(500)]

    assert min(delays) >= 3000
    assert max(delays) <= 4000
    assert len(set(delays)) > 100


def test_the_same_seed_gives_the_same_schedule():
    policy = RetryPolicy()

    assert [backoff_ms(policy, a, rng(1)) for a in (1, 2, 3)] == [
        backoff_ms(policy, a, rng(1)) for a in (1, 2, 3)
    ]


@pytest.mark.parametrize(
    ("policy", "error", "expected"),
    [
        pytest.param(RetryPolicy(), ValueError(), True, id="default-retries-everything"),
        pytest.param(RetryPolicy(), PermanentError("no"), False, id="permanent-never"),
        pytest.param(RetryPolicy(never_retry=(KeyError,)), KeyError(), False, id="never-retry"),
        pytest.param(RetryPolicy(retry_on=(TimeoutError,)), ValueError(), False, id="not-listed"),
        pytest.param(RetryPolicy(retry_on=(OSError,)), ConnectionError(), True, id="subclass"),
        pytest.param(
            RetryPolicy(retry_on=(OSError,), never_retry=(ConnectionError,)),
            ConnectionRefusedError(),
            False,
            id="never-wins",
        ),
    ],
)
def test_which_errors_are_retried(policy, error, expected):
    assert is_retryable(policy, error) is expected


def failure(retryable: bool) -> Failure:
    return Failure(reason=Reason.HANDLER_ERROR, type="E", message="m", retryable=retryable)


def test_no_delay_once_attempts_are_used_up_or_the_error_is_permanent():
    policy = RetryPolicy(max_attempts=3, jitter=0.0)

    assert next_delay_ms(policy, failure(True), 2, rng()) == 2000
    assert next_delay_ms(policy, failure(True), 3, rng()) is None
    assert next_delay_ms(policy, failure(False), 1, rng()) is None


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"max_attempts": 0}, "max_attempts must be >= 1"),
        ({"factor": 0.5}, "factor must be >= 1.0"),
        ({"jitter": 1.5}, "jitter must be between"),
        ({"retry_on": ("ValueError",)}, "must hold exception classes"),
    ],
)
def test_an_invalid_policy_is_refused_with_what_to_fix(options, expected):
    with pytest.raises(ActorDefinitionError, match=expected):
        RetryPolicy(**options)
