"""Decoding hostile bytes: only ever an EnvelopeError, never anything else, never a loop."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from asya.envelope import Envelope, Limits, Route, decode_envelope, encode_payload
from asya.errors import EnvelopeError
from tests.factories import T0, envelope

HEAD = b'{"id":"x","route":{"curr":"a"},'


@pytest.mark.parametrize(
    "body",
    [
        HEAD + b'"payload":"\xff\xfe"}',
        HEAD + b'"payload":' + b"[" * 1000 + b"]" * 1000 + b"}",
        HEAD + b'"payload":' + b'{"a":' * 1000 + b"1" + b"}" * 1000 + b"}",
        HEAD + b'"payload":123456789012345678901234567890}',
        HEAD + b'"payload":{"n":-9223372036854775809}}',
        HEAD + b'"payload":"\\ud800"}',
        HEAD + b'"payload":1e400}',
        b'{"id":"x","route":{"curr":"a\\n\\u0000"}}',
        b'{"id":"x","route":{"curr":"a","next":["Bad Name"]}}',
        b"",
        b"\x00\x01\x02",
    ],
    ids=[
        "invalid-utf8-in-string",
        "arrays-nested-1000-deep",
        "objects-nested-1000-deep",
        "integer-beyond-64-bits",
        "integer-below-minus-2-to-63",
        "unpaired-surrogate",
        "float-out-of-range",
        "control-characters-in-actor-name",
        "invalid-name-in-next",
        "empty",
        "binary",
    ],
)
def test_hostile_bodies_raise_only_envelope_error(body):
    with pytest.raises(EnvelopeError):
        decode_envelope(body, Limits())


@given(st.binary(max_size=300))
def test_arbitrary_bytes_decode_or_raise_envelope_error(body):
    outcome = _decode_or_error(body)

    assert isinstance(outcome, Envelope) or str(outcome).startswith(
        ("not valid JSON", "not a valid envelope")
    )


def _decode_or_error(body: bytes) -> Envelope | EnvelopeError:
    try:
        return decode_envelope(body, Limits())
    except EnvelopeError as exc:
        return exc


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda kids: st.lists(kids) | st.dictionaries(st.text(), kids),
        max_leaves=20,
    )
)
def test_any_json_payload_decodes_or_raises_envelope_error(payload):
    body = HEAD + b'"payload":' + msgspec.json.encode(payload) + b"}"

    try:
        decoded = decode_envelope(body, Limits())
    except EnvelopeError:
        assert any(abs(n) >= 2**63 for n in _ints(payload))
    else:
        assert decoded.payload == payload


def _ints(value):
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _ints(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _ints(item)


def test_integers_within_64_bits_still_decode():
    body = HEAD + b'"payload":[18446744073709551615,-9223372036854775808,"12345678901234567890"]}'

    decoded = decode_envelope(body, Limits())

    assert decoded.payload == [18446744073709551615, -9223372036854775808, "12345678901234567890"]


def test_a_deadline_without_a_timezone_is_read_as_utc():
    body = b'{"id":"x","route":{"curr":"a"},"status":{"deadline_at":"2030-01-01T00:00:00"}}'

    decoded = decode_envelope(body, Limits())

    assert decoded.status.deadline_at == datetime(2030, 1, 1, tzinfo=UTC)


def test_limits_refuse_values_that_are_not_positive():
    with pytest.raises(EnvelopeError, match="hop_limit must be > 0, got -1"):
        Limits(hop_limit=-1)
    with pytest.raises(EnvelopeError, match="max_payload_bytes must be > 0, got 0"):
        Limits(max_payload_bytes=0)


def test_a_route_built_in_code_refuses_invalid_actor_names():
    with pytest.raises(EnvelopeError, match="'Bad Name' is not a valid actor name"):
        Route(curr="Bad Name")
    with pytest.raises(EnvelopeError, match="'x_y' is not a valid actor name"):
        Route(curr="a", next=("x_y",))


def test_a_valid_envelope_still_round_trips():
    assert envelope("a", deadline_at=T0).status.deadline_at == T0


@pytest.mark.parametrize(
    ("depth", "decodes"),
    [(256, True), (257, False), (600, False), (950, False)],
    ids=["at-the-bound", "one-past", "600", "950"],
)
def test_nesting_is_bounded_by_one_fixed_depth_wherever_it_is_decoded(depth, decodes):
    body = HEAD + b'"payload":' + b"[" * depth + b"]" * depth + b"}"

    outcome = _decode_or_error(body)

    assert isinstance(outcome, Envelope) is decodes


def test_brackets_inside_strings_do_not_count_as_nesting():
    body = HEAD + b'"payload":{"text":"' + b"[" * 5000 + b'"}}'

    assert decode_envelope(body, Limits()).payload == {"text": "[" * 5000}


def test_a_payload_nested_past_the_bound_cannot_be_encoded():
    deep: list = []
    for _ in range(300):
        deep = [deep]

    with pytest.raises(EnvelopeError, match="more than 256 levels deep"):
        encode_payload(deep, Limits())
