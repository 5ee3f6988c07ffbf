"""Envelopes on the wire: JSON, validated on the way in, bounded in size."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from asya.envelope import (
    Limits,
    Phase,
    Status,
    decode_envelope,
    encode_envelope,
    new_envelope_id,
)
from asya.errors import EnvelopeError, PayloadTooLargeError
from tests.factories import T0, envelope, rng


def test_an_envelope_survives_encoding_and_decoding_unchanged():
    original = envelope("b", ["c"], ["a"], payload={"text": "héllo", "n": [1, 2]}, deadline_at=T0)

    decoded = decode_envelope(encode_envelope(original, Limits()), Limits())

    assert decoded == original


def test_the_wire_format_is_readable_json_with_the_documented_fields():
    body = encode_envelope(envelope("b", ["c"], ["a"], payload={"x": 1}), Limits())

    assert body.startswith(b'{"id":"e1","parent_id":null,"route":{"prev":["a"],"curr":"b"')
    assert b'"payload":{"x":1}' in body


def test_a_minimal_envelope_from_another_language_decodes_with_defaults():
    body = b'{"id": "x1", "route": {"curr": "clean"}, "payload": {"text": "hi"}}'

    decoded = decode_envelope(body, Limits())

    assert decoded.route.next == ()
    assert decoded.status == Status(phase=Phase.PENDING, attempt=1)
    assert decoded.headers == {}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(b"not json", "not valid JSON", id="not-json"),
        pytest.param(b'{"id": "x", "payload": 1}', "missing required field `route`", id="no-route"),
        pytest.param(
            b'{"id": "x", "route": {"curr": 42}}',
            "Expected `str`, got `int` - at `$.route.curr`",
            id="wrong-type",
        ),
        pytest.param(
            b'{"id": "x", "route": {"curr": "Bad_Name"}}', "at `$.route.curr`", id="bad-actor-name"
        ),
        pytest.param(b'{"id": "", "route": {"curr": "a"}}', "at `$.id`", id="empty-id"),
        pytest.param(
            b'{"id": "x", "route": {"curr": "a"}, "status": {"phase": "lost"}}',
            "at `$.status.phase`",
            id="unknown-phase",
        ),
    ],
)
def test_decoding_rejects_what_is_not_an_envelope_naming_the_field(body, expected):
    with pytest.raises(EnvelopeError) as caught:
        decode_envelope(body, Limits())

    assert expected in str(caught.value)


def test_encoding_a_payload_over_the_limit_fails_with_sizes():
    big = envelope(payload={"text": "x" * 200})

    with pytest.raises(PayloadTooLargeError) as caught:
        encode_envelope(big, Limits(max_payload_bytes=100))

    assert caught.value.limit_bytes == 100
    assert caught.value.observed_bytes == 211  # {"text":"…"}: 9 + 200 + 2


def test_decoding_a_body_over_the_limit_and_overhead_fails():
    body = encode_envelope(envelope(payload="x" * 70_000), Limits())

    with pytest.raises(PayloadTooLargeError):
        decode_envelope(body, Limits(max_payload_bytes=1000))


def test_a_payload_json_cannot_carry_is_an_envelope_error():
    with pytest.raises(EnvelopeError, match=r"payload\.s is <object .*not a JSON value"):
        encode_envelope(envelope(payload={"s": object()}), Limits())


def test_envelope_ids_are_ulids_that_sort_by_time():
    random_source = rng()

    first = new_envelope_id(T0, random_source)
    later = new_envelope_id(T0 + timedelta(milliseconds=1), random_source)

    assert re.fullmatch(r"[0-9A-HJKMNP-TV-Z]{26}", first)
    assert first < later


def test_envelope_ids_do_not_repeat():
    random_source = rng()

    ids = {new_envelope_id(T0, random_source) for _ in range(10_000)}

    assert len(ids) == 10_000
