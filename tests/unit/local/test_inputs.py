"""Input lines become envelopes, or error-end deliveries with their reason."""

from __future__ import annotations

import base64

import pytest

from asya.envelope import Envelope, Limits, Reason
from asya.errors import SettingsError
from asya.local.inputs import check_route, first_bare_payload, parse_line
from asya.routing import ERROR_END, Delivery
from tests.factories import T0, rng


def parse(line, route=("a", "b"), limits=None):
    raw = line if isinstance(line, bytes) else line.encode()
    return parse_line(raw, line_no=7, route=route, limits=limits or Limits(), now=T0, rng=rng())


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


def test_a_line_that_is_not_utf8_is_malformed_and_keeps_its_raw_bytes():
    line = b'{"text": "caf\xe9"}'

    item = parse(line)

    assert isinstance(item, Delivery)
    assert item.target == ERROR_END
    assert item.envelope.status.reason is Reason.MALFORMED_ENVELOPE
    assert item.envelope.status.error.message.startswith("input line 7: not UTF-8")
    assert base64.b64decode(item.envelope.payload["body_base64"]) == line


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        pytest.param([b'{"route": ["a"], "payload": 1}', b"", b"{broken"], None, id="none"),
        pytest.param([b"", b'{"route": ["a"], "payload": 1}', b'"bare"'], 3, id="third"),
        pytest.param([b'{"text": "no route key"}'], 1, id="object-without-route"),
        pytest.param([b'"caf\xe9"'], None, id="not-utf8-is-bad-not-bare"),
    ],
)
def test_the_first_bare_payload_is_found_by_its_line_number(lines, expected):
    assert first_bare_payload(lines) == expected


def test_a_route_naming_an_unknown_actor_is_refused_naming_the_closest_one():
    with pytest.raises(SettingsError) as caught:
        check_route(("normalize", "scroe"), ["normalize", "score", "split"], option="--route")

    assert str(caught.value) == (
        "--route names 'scroe', which the app does not define; did you mean 'score'?"
    )
    assert caught.value.variable == "--route"


def test_a_route_with_no_close_name_lists_the_actors():
    with pytest.raises(SettingsError, match="the actors are: score, split"):
        check_route(("translate",), ["split", "score"], option="--route")


def test_a_whole_envelope_routed_to_a_python_name_goes_to_error_end_naming_the_actor():
    item = parse('{"route": ["clean", "human_review"], "payload": {}}')

    assert isinstance(item, Delivery)
    assert item.target == ERROR_END
    assert item.envelope.status.reason is Reason.MALFORMED_ENVELOPE
    assert item.envelope.status.error.message == (
        "input line 7: route: 'human_review' is not a valid actor name: use lowercase letters,"
        " digits and '-', at most 53 characters; did you mean 'human-review' (actor names are"
        " kebab-case)?"
    )


def test_a_whole_envelope_at_an_end_actor_is_kept_as_it_was():
    item = parse('{"route": {"prev": ["a"], "curr": "happy-end"}, "payload": 1}')

    assert isinstance(item, Envelope)
    assert item.route.curr == "happy-end"


def test_check_route_prefers_the_kebab_case_form_of_a_python_name():
    with pytest.raises(SettingsError) as caught:
        check_route(["data_set"], ["dataset", "data-set"], option="--route")

    assert str(caught.value) == (
        "--route names 'data_set', which the app does not define; did you mean 'data-set'?"
    )
