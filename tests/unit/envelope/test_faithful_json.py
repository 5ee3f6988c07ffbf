"""A payload is encoded only if it arrives as it was sent: what JSON would change fails, named.

msgspec encodes NaN as null, a set as a list, bytes as base64, a date as a string and an int key
as a string key; each of those must fail where the payload is encoded (and so in every runner,
all of which encode through `encode_payload` / `check_payload`), naming the value's place in the
payload and the fix.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import uuid

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asya.envelope import Limits, check_payload, decode_envelope, encode_envelope, encode_payload
from asya.errors import EnvelopeError, PayloadTooLargeError
from asya.json_values import unfaithful_value
from tests.factories import envelope


class Colour(enum.Enum):
    RED = 1


class Label(enum.StrEnum):
    SPAM = "spam"


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Scored:
    text: str
    score: float


class Vector(msgspec.Struct):
    values: list[float]


@pytest.mark.parametrize(
    ("payload", "place", "fix"),
    [
        pytest.param(
            {"scores": [0.1, float("nan")]}, "payload.scores[1] is nan", "send None", id="nan"
        ),
        pytest.param({"x": float("inf")}, "payload.x is inf", "NaN or Infinity", id="inf"),
        pytest.param([float("-inf")], "payload[0] is -inf", "NaN or Infinity", id="-inf"),
        pytest.param({"tags": {"a"}}, "payload.tags is {'a'} (set)", "sorted(...)", id="set"),
        pytest.param(
            {"t": frozenset()}, "payload.t is frozenset() (frozenset)", "sorted", id="frozenset"
        ),
        pytest.param({"b": b"\x00"}, "payload.b is b'\\x00' (bytes)", ".decode()", id="bytes"),
        pytest.param({"b": bytearray(b"x")}, "(bytearray)", "base64", id="bytearray"),
        pytest.param(
            {"at": datetime.datetime(2026, 1, 1)},
            "payload.at is datetime.datetime(2026, 1, 1",
            ".isoformat()",
            id="datetime",
        ),
        pytest.param(
            {"on": datetime.date(2026, 1, 1)}, "(datetime.date)", ".isoformat()", id="date"
        ),
        pytest.param({"t": datetime.time(9)}, "(datetime.time)", ".isoformat()", id="time"),
        pytest.param(
            {"took": datetime.timedelta(seconds=2)},
            "(datetime.timedelta)",
            ".total_seconds()",
            id="timedelta",
        ),
        pytest.param({"id": uuid.UUID(int=7)}, "payload.id is UUID(", "str(...)", id="uuid"),
        pytest.param(
            {"price": decimal.Decimal("0.10")},
            "payload.price is Decimal('0.10')",
            "str(...)",
            id="decimal",
        ),
        pytest.param({"c": Colour.RED}, "payload.c is <Colour.RED: 1>", ".value", id="plain-enum"),
        pytest.param(
            {"counts": {1: "a"}}, "payload.counts has the key 1 (int)", "str keys", id="int-key"
        ),
        pytest.param(
            {"n": 2**64}, "payload.n is 18446744073709551616", "as a string", id="int-past-64-bits"
        ),
        pytest.param(
            {"n": -(2**63) - 1},
            "payload.n is -9223372036854775809",
            "as a string",
            id="int-below-64-bits",
        ),
        pytest.param({"s": "a\ud800"}, "payload.s is 'a\\ud800'", "lone surrogate", id="surrogate"),
        pytest.param(
            {"o": object()}, "payload.o is <object object", "dict, list, str", id="object"
        ),
        pytest.param(
            {"my key": [{"x": {1}}]}, "payload['my key'][0].x is {1}", "sorted", id="quoted-key"
        ),
        pytest.param(
            Scored("a", float("nan")), "payload.score is nan", "send None", id="in-a-dataclass"
        ),
        pytest.param(
            Vector([1.0, float("nan")]), "payload.values[1] is nan", "send None", id="in-a-struct"
        ),
        pytest.param({"pair": (1, {2})}, "payload.pair[1] is {2}", "sorted", id="in-a-tuple"),
    ],
)
def test_a_value_json_would_change_fails_naming_its_place_and_the_fix(payload, place, fix):
    with pytest.raises(EnvelopeError) as caught:
        encode_payload(payload, Limits())

    assert place in str(caught.value)
    assert fix in str(caught.value)


@pytest.mark.parametrize(
    ("value", "fix"),
    [
        pytest.param(np.float32(0.5), ".item()", id="float32"),
        pytest.param(np.float64(0.5), ".item()", id="float64"),
        pytest.param(np.int64(3), ".item()", id="int64"),
        pytest.param(np.bool_(True), ".item()", id="bool"),
        pytest.param(np.array([1.0, 2.0]), ".tolist()", id="array"),
    ],
)
def test_a_numpy_value_fails_with_the_numpy_fix(value, fix):
    with pytest.raises(EnvelopeError, match=r"^payload\.scores\[1\] is .*\(numpy\.") as caught:
        encode_payload({"scores": [0.1, value]}, Limits())

    assert f"convert it with {fix}" in str(caught.value)


def test_the_first_bad_value_in_document_order_is_the_one_named():
    payload = {"a": [1, {"b": float("nan")}], "c": {1, 2}}

    with pytest.raises(EnvelopeError, match=r"^payload\.a\[1\]\.b is nan"):
        encode_payload(payload, Limits())


def test_an_envelope_is_refused_as_its_payload_is_and_so_is_what_a_client_sends():
    with pytest.raises(EnvelopeError, match=r"payload\.x is nan"):
        encode_envelope(envelope(payload={"x": float("nan")}), Limits())


def test_check_payload_holds_to_the_same_rule_without_the_size_limit():
    check_payload("x" * (5 * 1024 * 1024))

    with pytest.raises(EnvelopeError, match=r"^payloads\[2\]\.x is nan"):
        check_payload({"x": float("nan")}, root="payloads[2]")


@pytest.mark.parametrize(
    ("payload", "arrives_as"),
    [
        pytest.param({"box": (1, 2, 3, 4)}, {"box": [1, 2, 3, 4]}, id="tuple"),
        pytest.param(
            collections.namedtuple("Point", "x y")(1.5, 2.5), [1.5, 2.5], id="named-tuple"
        ),
        pytest.param(collections.OrderedDict(a=1), {"a": 1}, id="dict-subclass"),
        pytest.param(
            {"label": Label.SPAM, "level": Level.HIGH},
            {"label": "spam", "level": 3},
            id="str-and-int-enums",
        ),
        pytest.param({Label.SPAM: 1}, {"spam": 1}, id="str-enum-key"),
        pytest.param(Scored("a", 0.5), {"text": "a", "score": 0.5}, id="dataclass"),
        pytest.param(Vector([1.0]), {"values": [1.0]}, id="struct"),
        pytest.param(
            {"n": 2**64 - 1, "m": -(2**63)}, {"n": 2**64 - 1, "m": -(2**63)}, id="64-bit-bounds"
        ),
        pytest.param(
            {"s": "héllo ☃", "ok": [True, None, -0.0, 1e308]},
            {"s": "héllo ☃", "ok": [True, None, -0.0, 1e308]},
            id="plain-json",
        ),
    ],
)
def test_what_is_converted_on_purpose_arrives_with_its_value_intact(payload, arrives_as):
    body = encode_envelope(envelope(payload=payload), Limits())

    assert decode_envelope(body, Limits()).payload == arrives_as


def test_a_shared_container_is_looked_at_once_and_named_where_it_first_appears():
    shared = [float("nan")]

    with pytest.raises(EnvelopeError, match=r"^payload\.a\[0\] is nan"):
        encode_payload({"a": shared, "b": shared}, Limits())


def test_the_walk_ends_on_a_cycle():
    cyclic: list = [(1,)]
    cyclic.append(cyclic)

    assert unfaithful_value(cyclic) is None
    with pytest.raises(EnvelopeError, match="more than 256 levels deep"):
        encode_payload(cyclic, Limits())


def test_the_size_limit_still_holds_and_is_checked_as_before():
    with pytest.raises(PayloadTooLargeError):
        encode_payload({"x": "y" * 200}, Limits(max_payload_bytes=100))


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_every_plain_json_value_is_encoded_and_arrives_equal(payload):
    assert msgspec.json.decode(encode_payload(payload, Limits())) == payload


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES, st.sampled_from([float("nan"), float("inf"), {1}, b"x", Colour.RED]))
def test_a_bad_value_anywhere_in_plain_json_is_found(payload, bad):
    with pytest.raises(EnvelopeError, match=r"^payload\.wrapped\[1\]"):
        encode_payload({"wrapped": [payload, bad]}, Limits())
