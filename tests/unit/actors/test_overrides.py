"""`asya.overrides`: the AsyncActor's execution fields applied over the decorator's."""

from __future__ import annotations

import pytest

from asya.actor import build_spec
from asya.errors import ActorDefinitionError
from asya.overrides import apply_overrides, parse_overrides
from asya.retry import RetryPolicy


class FlakyError(Exception):
    pass


def handler(payload):
    return payload


SPEC = build_spec(
    handler,
    {
        "name": "work",
        "timeout_s": 30,
        "concurrency": 2,
        "batch": 8,
        "batch_wait_ms": 40,
        "retry": RetryPolicy(max_attempts=5, base_delay_ms=10, retry_on=(FlakyError,)),
    },
)


def test_no_override_leaves_the_spec_as_it_was():
    assert apply_overrides(SPEC, parse_overrides("{}")) is SPEC


def test_each_field_replaces_the_decorators():
    overrides = parse_overrides(
        '{"timeoutSeconds": 2.5, "concurrency": 6, "batch": {"size": 32, "waitMs": 5}}'
    )

    spec = apply_overrides(SPEC, overrides)

    assert (spec.timeout_s, spec.concurrency, spec.batch, spec.batch_wait_ms) == (2.5, 6, 32, 5)
    assert spec.retry == SPEC.retry
    assert (spec.name, spec.target) == (SPEC.name, SPEC.target)


def test_a_batch_without_wait_keeps_the_decorators_wait():
    spec = apply_overrides(SPEC, parse_overrides('{"batch": {"size": 4}}'))

    assert (spec.batch, spec.batch_wait_ms) == (4, 40)


def test_a_retry_override_replaces_the_policy_whole_but_keeps_the_exception_types():
    spec = apply_overrides(SPEC, parse_overrides('{"retry": {"maxAttempts": 2}}'))

    assert spec.retry.max_attempts == 2
    assert spec.retry.base_delay_ms == RetryPolicy().base_delay_ms  # not the decorator's 10
    assert spec.retry.retry_on == (FlakyError,)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("not json", "ASYA_ACTOR_OVERRIDES is invalid"),
        ('{"timeoutSeconds": 0}', "timeoutSeconds"),
        ('{"concurrency": 0}', "concurrency"),
        ('{"concurency": 2}', "concurency"),
        ('{"batch": {"size": 0}}', "batch.size"),
        ('{"retry": {"maxAttempts": "many"}}', "retry.maxAttempts"),
    ],
)
def test_bad_overrides_are_refused_naming_the_field(text, named):
    with pytest.raises(ActorDefinitionError, match="ASYA_ACTOR_OVERRIDES") as info:
        parse_overrides(text)

    assert named in str(info.value)


def test_a_retry_override_that_is_no_valid_policy_is_refused():
    with pytest.raises(ActorDefinitionError, match=r"factor must be >= 1\.0"):
        apply_overrides(SPEC, parse_overrides('{"retry": {"factor": 0.5}}'))


def test_a_batch_for_an_actor_that_takes_one_payload_is_refused_naming_the_fix():
    one_at_a_time = build_spec(handler, {"name": "single"})

    with pytest.raises(ActorDefinitionError, match=r"'single'.*@actor\(batch=N\)"):
        apply_overrides(one_at_a_time, parse_overrides('{"batch": {"size": 4}}'))
