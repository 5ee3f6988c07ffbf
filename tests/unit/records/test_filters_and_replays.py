"""What `asya results` shows and what `asya replay` sends back, decided without a broker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from asya.crew.records import Filters, is_replayable, parse_since, plan_replay
from asya.envelope import Phase, Reason
from asya.routing import ERROR_END, Rejection, plan_rejection
from tests.factories import T0, envelope


def _failed(env, reason=Reason.HANDLER_ERROR):
    return plan_rejection(env, Rejection(reason, "boom"), T0).envelope


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10m", T0 - timedelta(minutes=10)),
        ("2h", T0 - timedelta(hours=2)),
        ("1d", T0 - timedelta(days=1)),
        ("30s", T0 - timedelta(seconds=30)),
        ("2026-05-01T12:00:00Z", datetime(2026, 5, 1, 12, tzinfo=UTC)),
        ("2026-05-01T12:00:00", datetime(2026, 5, 1, 12, tzinfo=UTC)),
    ],
    ids=["minutes", "hours", "days", "seconds", "iso-utc", "iso-naive-is-utc"],
)
def test_since_takes_an_age_or_an_iso_time(text, expected):
    assert parse_since(text, T0) == expected


@pytest.mark.parametrize("text", ["yesterday", "10x", "0m", "-5m", ""])
def test_a_bad_since_names_the_formats_it_takes(text):
    with pytest.raises(ValueError, match=r"ISO 8601.*10m"):
        parse_since(text, T0)


@pytest.mark.parametrize(
    ("filters", "matches"),
    [
        (Filters(), True),
        (Filters(reason="HandlerError"), True),
        (Filters(reason="Timeout"), False),
        (Filters(actor="a"), True),
        (Filters(actor="b"), False),
        (Filters(envelope_id="e1"), True),
        (Filters(envelope_id="e2"), False),
        (Filters(reason="HandlerError", actor="a", envelope_id="e1"), True),
    ],
    ids=["none", "reason", "other-reason", "actor", "other-actor", "id", "other-id", "all"],
)
def test_filters_match_on_reason_actor_and_id(filters, matches):
    assert filters.matches(_failed(envelope("a", ("b",), id="e1"))) is matches


def test_a_replay_goes_back_to_where_it_failed_with_a_fresh_attempt_and_its_history():
    failed = _failed(envelope("a", ("b", "c"), ("x",), attempt=3, payload={"k": 1}))

    replay = plan_replay(failed, "7:e1", T0 + timedelta(hours=1))

    assert (replay.route.prev, replay.route.curr, replay.route.next) == (("x",), "a", ("b", "c"))
    assert (replay.status.phase, replay.status.attempt, replay.status.reason) == (
        Phase.PENDING,
        1,
        None,
    )
    assert replay.status.error is None
    assert [e.message for e in replay.status.retries] == ["boom"]
    assert replay.headers["asya-replay-of"] == "7:e1"
    assert replay.payload == {"k": 1}


def test_a_failure_wrapped_at_an_end_actor_has_nowhere_to_be_replayed():
    assert is_replayable(_failed(envelope("a"))) is True
    assert is_replayable(_failed(envelope(ERROR_END), Reason.MALFORMED_ENVELOPE)) is False
