"""Input lines become envelopes, or error-end deliveries with their reason."""

from __future__ import annotations

import pytest

from asya.envelope import Envelope, Limits, Reason
from asya.local.inputs import parse_line
from asya.routing import ERROR_END, Delivery
from tests.factories import T0, rng


def parse(line, route=("a", "b"), limits=None):
    return parse_line(line, line_no=7, route=route, limits=limits or Limits(), now=T0, rng=rng())


def test_a_bare_payload_is_sent_along_the_route():
    item = parse('{"text": "hi"}')

    assert isinstance(item, Envelope)
    assert (item.route.curr, item.route.next, item.payload) == ("a", ("b",), {"text": "hi"})
    assert item.status.created_at == T0


def test_a_whole_envelope_keeps_its_own_route_id_headers_and_deadline():
    item = parse(
        '{"id": "mine", "route": {"curr": "x", "next": ["y"]}, "headers": {"k": "v"},'
        ' "status": {"deadline_at": "2030-01-01T00:00:00Z"}, "payload": 1}'
    )

    assert isinstance(item, Envelope)
    assert (item.id, item.route.curr, item.route.next, item.headers) == (
        "mine",
        "x",
        ("y",),
        {"k": "v"},
    )
    assert item.status.deadline_at.year == 2030


def test_a_route_may_be_given_as_a_list_of_actor_names():
    item = parse('{"route": ["x", "y", "z"], "payload": null}')

    assert (item.route.curr, item.route.next) == ("x", ("y", "z"))


@pytest.mark.parametrize(
    ("line", "reason", "expected"),
    [
        pytest.param('{"text": "cut', Reason.MALFORMED_ENVELOPE, "not valid JSON", id="json"),
        pytest.param(
            '{"route": {"curr": 1}}',
            Reason.MALFORMED_ENVELOPE,
            "Expected `str`, got `int` - at `$.route.curr`",
            id="wrong-type",
        ),
        pytest.param(
            '{"route": []}',
            Reason.MALFORMED_ENVELOPE,
            "missing required field `curr`",
            id="empty-route",
        ),
        pytest.param(
            '{"text": "' + "x" * 200 + '"}',
            Reason.PAYLOAD_TOO_LARGE,
            "over the limit",
            id="too-large",
        ),
    ],
)
def test_a_bad_line_becomes_an_error_end_delivery_naming_the_line(line, reason, expected):
    item = parse(line, limits=Limits(max_payload_bytes=100))

    assert isinstance(item, Delivery)
    assert item.target == ERROR_END
    assert item.envelope.status.reason is reason
    assert item.envelope.status.error.message.startswith("input line 7: ")
    assert expected in item.envelope.status.error.message
    assert item.envelope.payload["body_bytes"] == len(line.encode())


def test_a_bare_payload_without_any_route_is_refused_with_how_to_fix():
    item = parse('{"text": "hi"}', route=None)

    assert isinstance(item, Delivery)
    assert "pass --route a,b,c or declare ROUTE" in item.envelope.status.error.message
