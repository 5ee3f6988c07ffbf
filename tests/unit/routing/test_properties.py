"""Invariants of routing, for any route and any handler result."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from asya.envelope import Limits, decode_envelope, encode_envelope
from asya.outcome import Emitted, Failure, Success
from asya.routing import END_ACTORS, ERROR_END, plan_failure, plan_success
from tests.factories import T0, envelope

names = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True).filter(lambda n: n not in END_ACTORS)
routes = st.lists(names, max_size=5)
payloads = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
outputs = st.lists(st.builds(Emitted, payload=payloads, next=routes.map(tuple)), max_size=6)


@given(prev=routes, curr=names, next=routes, outs=outputs, fan_out=st.booleans())
def test_routing_neither_loses_nor_duplicates_and_history_only_grows(
    prev, curr, next, outs, fan_out
):
    env = envelope(curr, next, prev, id="root")
    success = Success(outputs=tuple(outs), fan_out=fan_out or len(outs) > 1)

    deliveries = plan_success(env, success, T0)

    assert len(deliveries) == max(1, len(outs))
    ids = [d.envelope.id for d in deliveries]
    assert len(set(ids)) == len(ids)
    for delivery in deliveries:
        route = delivery.envelope.route
        if delivery.target != ERROR_END:
            assert route.prev == (*prev, curr)
            assert delivery.target == route.curr


@given(prev=routes, curr=names, next=routes, outs=outputs)
def test_every_delivery_encodes_to_a_valid_envelope(prev, curr, next, outs):
    env = envelope(curr, next, prev)

    deliveries = plan_success(env, Success(outputs=tuple(outs), fan_out=True), T0)

    for delivery in deliveries:
        body = encode_envelope(delivery.envelope, Limits())
        assert decode_envelope(body, Limits()) == delivery.envelope


@given(attempts=st.integers(1, 10), delay=st.none() | st.integers(0, 10_000))
def test_a_failure_is_one_delivery_to_the_same_actor_or_to_error_end(attempts, delay):
    env = envelope("a", ["b"], attempt=attempts)
    failure = Failure(reason="HandlerError", type="E", message="m", retryable=True)

    delivery = plan_failure(env, failure, delay_ms=delay, max_attempts=10, now=T0)

    assert delivery.target == ("a" if delay is not None else ERROR_END)
    assert delivery.envelope.id == env.id
    assert delivery.envelope.route == env.route
