"""Failures: retried at the same actor while the policy allows, then error-end."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest

from asya.envelope import Limits, Phase, Reason
from asya.outcome import Failure
from asya.routing import (
    ERROR_END,
    Delivery,
    Rejection,
    check_arrival,
    plan_failure,
    plan_malformed,
    plan_unknown_actor,
)
from tests.factories import T0, envelope

BOOM = Failure(reason=Reason.HANDLER_ERROR, type="ValueError", message="boom", retryable=True)


def test_a_retry_goes_back_to_the_same_actor_after_the_delay_with_the_attempt_counted():
    env = envelope("b", ["c"], ["a"], attempt=1)

    delivery = plan_failure(env, BOOM, delay_ms=1000, max_attempts=3, now=T0)

    assert delivery.target == "b"
    assert delivery.delay_ms == 1000
    assert delivery.envelope.route == env.route
    assert delivery.envelope.status.phase is Phase.RETRYING
    assert delivery.envelope.status.attempt == 2
    assert delivery.envelope.status.max_attempts == 3
    assert [e.message for e in delivery.envelope.status.retries] == ["boom"]


def test_without_a_delay_the_envelope_goes_to_error_end_where_it_failed():
    env = envelope("b", ["c"], ["a"], attempt=3)

    delivery = plan_failure(env, BOOM, delay_ms=None, max_attempts=3, now=T0)

    assert delivery.target == ERROR_END
    assert delivery.envelope.route == env.route
    status = delivery.envelope.status
    assert status.phase is Phase.FAILED
    assert status.reason is Reason.HANDLER_ERROR
    assert (status.error.type, status.error.actor, status.error.attempt) == ("ValueError", "b", 3)


def test_every_attempt_is_recorded_by_the_time_it_fails():
    env = envelope("b")
    for _ in range(2):
        env = plan_failure(env, BOOM, delay_ms=10, max_attempts=3, now=T0).envelope

    final = plan_failure(env, BOOM, delay_ms=None, max_attempts=3, now=T0).envelope

    assert [e.attempt for e in final.status.retries] == [1, 2]
    assert final.status.error.attempt == 3


@pytest.mark.parametrize(
    ("env", "actor", "reason"),
    [
        pytest.param(
            envelope("a", deadline_at=T0 - timedelta(seconds=1)),
            "a",
            Reason.DEADLINE_EXCEEDED,
            id="deadline-passed",
        ),
        pytest.param(
            envelope("a", deadline_at=T0), "a", Reason.DEADLINE_EXCEEDED, id="deadline-now"
        ),
        pytest.param(
            envelope("a", prev=["x"] * 64), "a", Reason.HOP_LIMIT_EXCEEDED, id="hop-limit"
        ),
        pytest.param(envelope("a"), "b", Reason.MALFORMED_ENVELOPE, id="wrong-actor"),
    ],
)
def test_arrival_checks_stop_an_envelope_before_user_code(env, actor, reason):
    rejection = check_arrival(env, actor, T0, Limits(hop_limit=64))

    assert rejection is not None
    assert rejection.reason is reason


@pytest.mark.parametrize(
    "env",
    [
        pytest.param(envelope("a", deadline_at=T0 + timedelta(seconds=1)), id="deadline-ahead"),
        pytest.param(envelope("a", prev=["x"] * 63), id="one-hop-left"),
        pytest.param(envelope("a"), id="plain"),
    ],
)
def test_arrival_checks_let_a_good_envelope_through(env):
    assert check_arrival(env, "a", T0, Limits(hop_limit=64)) is None


def test_malformed_bytes_are_wrapped_with_their_raw_body_and_reason():
    delivery = plan_malformed(
        b"\xffnot json",
        Rejection(Reason.MALFORMED_ENVELOPE, "bad"),
        actor="a",
        envelope_id="new",
        now=T0,
    )

    assert delivery.target == ERROR_END
    assert delivery.envelope.payload == {
        "body_base64": "/25vdCBqc29u",
        "body_bytes": 9,
        "body_sha256": "7de3f1be82fb9268cc4eb1a2fd8a9eab636f0577eb0ccbd2ab30480d0771b5ef",
        "body_truncated": False,
    }
    assert delivery.envelope.status.reason is Reason.MALFORMED_ENVELOPE
    assert delivery.envelope.status.error.message == "bad"


def test_a_large_malformed_body_is_kept_cut_to_16_kib_with_its_size_and_hash():
    body = b"x" * (120 * 1024 * 1024)

    delivery = plan_malformed(
        body, Rejection(Reason.PAYLOAD_TOO_LARGE, "big"), actor="a", envelope_id="new", now=T0
    )

    record = delivery.envelope.payload
    assert record["body_bytes"] == 125_829_120
    assert record["body_truncated"] is True
    assert len(record["body_base64"]) == 21_848  # 16 KiB as base64
    assert record["body_sha256"] == hashlib.sha256(body).hexdigest()


def test_a_huge_error_message_and_traceback_are_cut_in_the_record():
    env = envelope("a")
    failure = Failure(
        reason=Reason.HANDLER_ERROR,
        type="ValueError",
        message="m" * 1_000_000,
        retryable=False,
        traceback="t" * 999_990 + "raised here",
    )

    delivery = plan_failure(env, failure, delay_ms=None, max_attempts=1, now=T0)

    error = delivery.envelope.status.error
    assert error.message == "m" * 4_000 + "... [996000 more characters]"
    assert error.traceback.endswith("raised here")
    assert error.traceback.startswith("[984001 characters cut]...")


def test_an_envelope_for_an_actor_without_a_queue_goes_to_error_end():
    env = envelope("ghost", prev=["a"])

    rerouted = plan_unknown_actor(Delivery("ghost", env), "no actor named 'ghost'", T0)

    assert rerouted.target == ERROR_END
    assert rerouted.envelope.status.reason is Reason.UNKNOWN_ACTOR
    assert rerouted.envelope.route.curr == "ghost"
