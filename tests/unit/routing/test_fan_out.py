"""Generators fan out: one child envelope per yield."""

from __future__ import annotations

import msgspec
import pytest

from asya.envelope import Branch, Limits, Reason, decode_envelope, encode_envelope
from asya.errors import EnvelopeError
from asya.outcome import Emitted, Failure, Success
from asya.routing import HAPPY_END, Rejection, plan_failure, plan_rejection, plan_success
from tests.factories import T0, envelope


def test_each_output_of_a_generator_becomes_a_child_with_its_own_id():
    env = envelope("split", ["embed"], id="doc")
    outputs = tuple(Emitted(payload=i, next=("embed",)) for i in range(3))

    deliveries = plan_success(env, Success(outputs=outputs, fan_out=True), T0)

    assert [d.envelope.id for d in deliveries] == ["doc-1", "doc-2", "doc-3"]
    assert {d.envelope.parent_id for d in deliveries} == {"doc"}
    assert [d.envelope.payload for d in deliveries] == [0, 1, 2]
    assert {d.target for d in deliveries} == {"embed"}


def test_children_may_leave_on_different_routes():
    env = envelope("split", id="doc")
    outputs = (Emitted(payload=1, next=("a",)), Emitted(payload=2, next=()))

    deliveries = plan_success(env, Success(outputs=outputs, fan_out=True), T0)

    assert [d.target for d in deliveries] == ["a", HAPPY_END]


def test_a_generator_that_yields_nothing_ends_the_envelope_successfully():
    env = envelope("split", ["embed"], id="doc", payload={"text": ""})

    [delivery] = plan_success(env, Success(outputs=(), fan_out=True), T0)

    assert delivery.target == HAPPY_END
    assert delivery.envelope.id == "doc"


def test_grandchildren_extend_their_parents_id():
    child = envelope("split2", ["x"], id="doc-2", parent_id="doc")

    [grandchild] = plan_success(
        child, Success(outputs=(Emitted(payload=1, next=("x",)),), fan_out=True), T0
    )

    assert grandchild.envelope.id == "doc-2-1"
    assert grandchild.envelope.parent_id == "doc-2"


def test_a_plain_return_keeps_the_id_and_parent():
    child = envelope("a", ["b"], id="doc-2", parent_id="doc")

    [delivery] = plan_success(child, Success(outputs=(Emitted(payload=1, next=("b",)),)), T0)

    assert delivery.envelope.id == "doc-2"
    assert delivery.envelope.parent_id == "doc"


def test_each_child_records_its_place_among_its_siblings():
    env = envelope("split", ["embed"], id="doc")
    outputs = tuple(Emitted(payload=i, next=("embed",)) for i in range(3))

    deliveries = plan_success(env, Success(outputs=outputs, fan_out=True), T0)

    assert [d.envelope.lineage for d in deliveries] == [
        (Branch(index=1, of=3),),
        (Branch(index=2, of=3),),
        (Branch(index=3, of=3),),
    ]


def test_grandchildren_extend_their_parents_lineage():
    child = msgspec.structs.replace(
        envelope("split2", ["x"], id="doc-2", parent_id="doc"), lineage=(Branch(index=2, of=3),)
    )
    outputs = tuple(Emitted(payload=i, next=("x",)) for i in range(2))

    [_, second] = plan_success(child, Success(outputs=outputs, fan_out=True), T0)

    assert second.envelope.lineage == (Branch(index=2, of=3), Branch(index=2, of=2))


IN_A_TREE = (Branch(index=2, of=3), Branch(index=1, of=2))


def child_in_a_tree(curr="a", next=("b",)):
    return msgspec.structs.replace(
        envelope(curr, next, id="doc-2-1", parent_id="doc-2"), lineage=IN_A_TREE
    )


def failure(reason=Reason.HANDLER_ERROR):
    return Failure(reason=reason, type="ValueError", message="no", retryable=True)


@pytest.mark.parametrize(
    "plan",
    [
        pytest.param(
            lambda env: plan_success(env, Success(outputs=(Emitted(payload=1, next=("b",)),)), T0),
            id="plain-return",
        ),
        pytest.param(
            lambda env: plan_success(
                env, Success(outputs=(Emitted(payload=1, next=("c", "b")),)), T0
            ),
            id="route-rewritten",
        ),
        pytest.param(lambda env: plan_success(env, Success(), T0), id="returned-none"),
        pytest.param(
            lambda env: plan_success(env, Success(fan_out=True), T0), id="yielded-nothing"
        ),
        pytest.param(
            lambda env: plan_success(
                env, Success(outputs=(Emitted(payload=1, next=("error-end",)),)), T0
            ),
            id="bad-route",
        ),
        pytest.param(
            lambda env: [plan_failure(env, failure(), delay_ms=100, max_attempts=3, now=T0)],
            id="retried",
        ),
        pytest.param(
            lambda env: [plan_failure(env, failure(), delay_ms=None, max_attempts=3, now=T0)],
            id="failed",
        ),
        pytest.param(
            lambda env: [plan_rejection(env, Rejection(Reason.DEADLINE_EXCEEDED, "late"), T0)],
            id="rejected",
        ),
    ],
)
def test_everything_but_a_fan_out_keeps_the_lineage_and_parent(plan):
    [delivery] = plan(child_in_a_tree())

    assert delivery.envelope.lineage == IN_A_TREE
    assert delivery.envelope.parent_id == "doc-2"


def test_the_lineage_survives_json_on_the_wire():
    sent = child_in_a_tree()

    body = encode_envelope(sent, Limits())

    assert b'"lineage":[{"index":2,"of":3},{"index":1,"of":2}]' in body
    assert decode_envelope(body, Limits()) == sent


def test_an_envelope_without_a_lineage_decodes_as_the_root_of_its_tree():
    body = b'{"id": "x1", "route": {"curr": "clean"}, "payload": 1}'

    assert decode_envelope(body, Limits()).lineage == ()


@pytest.mark.parametrize(
    "lineage",
    [
        pytest.param(b'[{"index": 0, "of": 2}]', id="index-zero"),
        pytest.param(b'[{"index": 3, "of": 2}]', id="index-past-siblings"),
        pytest.param(b'[{"index": 1}]', id="no-sibling-count"),
        pytest.param(b'{"index": 1, "of": 1}', id="not-a-list"),
    ],
)
def test_a_lineage_that_is_no_place_in_a_tree_is_refused_on_decoding(lineage):
    body = b'{"id": "x1", "route": {"curr": "a"}, "lineage": ' + lineage + b"}"

    with pytest.raises(EnvelopeError, match=r"\$\.lineage"):
        decode_envelope(body, Limits())
