"""Generators fan out: one child envelope per yield."""

from __future__ import annotations

from asya.outcome import Emitted, Success
from asya.routing import HAPPY_END, plan_success
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
