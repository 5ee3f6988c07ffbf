"""Where an envelope goes after a successful call."""

from __future__ import annotations

import pytest

from asya.envelope import Phase, Reason
from asya.outcome import Emitted, Success
from asya.routing import ERROR_END, HAPPY_END, plan_success
from tests.factories import T0, envelope


def emitted(payload, next=(), headers=None):
    return Emitted(payload=payload, next=tuple(next), headers=headers or {})


def test_curr_moves_to_prev_and_the_first_of_next_becomes_curr():
    env = envelope("b", ["c", "d"], ["a"])

    [delivery] = plan_success(env, Success(outputs=(emitted({"n": 2}, ["c", "d"]),)), T0)

    assert delivery.target == "c"
    assert delivery.envelope.route.prev == ("a", "b")
    assert delivery.envelope.route.curr == "c"
    assert delivery.envelope.route.next == ("d",)
    assert delivery.envelope.payload == {"n": 2}
    assert delivery.envelope.id == "e1"


def test_with_nothing_next_the_envelope_goes_to_happy_end_succeeded():
    env = envelope("b", [], ["a"])

    [delivery] = plan_success(env, Success(outputs=(emitted("done"),)), T0)

    assert delivery.target == HAPPY_END
    assert delivery.envelope.route.prev == ("a", "b")
    assert delivery.envelope.status.phase is Phase.SUCCEEDED


def test_returning_none_ends_the_pipeline_with_the_payload_it_received():
    env = envelope("b", ["c"], payload={"kept": True})

    [delivery] = plan_success(env, Success(), T0)

    assert delivery.target == HAPPY_END
    assert delivery.envelope.payload == {"kept": True}
    assert delivery.envelope.route.next == ()


def test_a_rewritten_next_is_followed():
    env = envelope("judge", ["store"])

    [delivery] = plan_success(env, Success(outputs=(emitted(1, ["refine", "judge", "store"]),)), T0)

    assert delivery.target == "refine"
    assert delivery.envelope.route.next == ("judge", "store")


def test_headers_left_by_the_handler_travel_on():
    env = envelope("a", ["b"], headers={"trace": "t1"})

    [delivery] = plan_success(
        env, Success(outputs=(emitted(1, ["b"], {"trace": "t1", "k": "v"}),)), T0
    )

    assert delivery.envelope.headers == {"trace": "t1", "k": "v"}


def test_the_attempt_count_starts_again_at_the_next_actor():
    env = envelope("a", ["b"], attempt=3)

    [delivery] = plan_success(env, Success(outputs=(emitted(1, ["b"]),)), T0)

    assert delivery.envelope.status.attempt == 1
    assert delivery.envelope.status.retries == ()


def test_the_deadline_travels_with_the_envelope():
    env = envelope("a", ["b"], deadline_at=T0)

    [delivery] = plan_success(env, Success(outputs=(emitted(1, ["b"]),)), T0)

    assert delivery.envelope.status.deadline_at == T0


@pytest.mark.parametrize(
    ("bad_next", "expected"),
    [
        pytest.param(["Not_Valid"], "not a valid actor name", id="invalid-name"),
        pytest.param(["happy-end"], "is an end actor", id="end-actor"),
        pytest.param(["ok", "error-end"], "is an end actor", id="end-actor-later"),
    ],
)
def test_a_next_naming_something_that_cannot_be_an_actor_goes_to_error_end(bad_next, expected):
    env = envelope("a", ["b"])

    [delivery] = plan_success(env, Success(outputs=(emitted({"x": 1}, bad_next),)), T0)

    assert delivery.target == ERROR_END
    assert delivery.envelope.status.reason is Reason.UNKNOWN_ACTOR
    assert expected in delivery.envelope.status.error.message
    assert delivery.envelope.route.curr == "a"
    assert delivery.envelope.payload == {"x": 1}
