"""A handler may rewrite `route.next` and the headers; the rest of its Context is history."""

from __future__ import annotations

import pytest

from asya import Context, actor
from asya.testing import call_actor, make_context


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("prev", ("elsewhere",), id="prev"),
        pytest.param("curr", "elsewhere", id="curr"),
    ],
)
def test_writing_route_history_raises_saying_only_next_is_writable(field, value):
    ctx = make_context(route=["judge", "store"], prev=["clean"])

    with pytest.raises(AttributeError) as caught:
        setattr(ctx.route, field, value)

    assert str(caught.value) == (
        f"route.{field} is read-only (the route so far); only route.next is writable"
    )
    assert (ctx.route.prev, ctx.route.curr) == (("clean",), "judge")


@pytest.mark.parametrize("field", ["id", "parent_id", "actor", "attempt", "route", "deadline_at"])
def test_writing_the_context_itself_raises_naming_what_is_writable(field):
    ctx = make_context(route=["judge"])

    with pytest.raises(AttributeError) as caught:
        setattr(ctx, field, None)

    assert str(caught.value) == (
        f"ctx.{field} is read-only; only ctx.headers and ctx.route.next are writable"
    )


def test_a_handler_that_writes_history_fails_with_the_reason_in_its_failure():
    @actor(name="judge")
    def judge(doc, ctx: Context):
        ctx.route.curr = "other"
        return doc

    result = call_actor(judge, {"n": 1})

    assert result.failure is not None
    assert (result.failure.type, result.failure.message) == (
        "builtins.AttributeError",
        "route.curr is read-only (the route so far); only route.next is writable",
    )


def test_next_may_be_replaced_by_any_sequence_and_stays_a_list():
    ctx = make_context(route=["judge", "store"])

    ctx.route.next = ("refine", "judge")
    ctx.route.next.append("store")

    assert ctx.route.next == ["refine", "judge", "store"]


def test_next_refuses_a_bare_string_that_would_become_one_actor_per_letter():
    ctx = make_context(route=["judge"])

    with pytest.raises(TypeError, match=r"write route.next = \['store'\]"):
        ctx.route.next = "store"


def test_headers_are_writable_item_by_item_or_replaced_whole():
    @actor(name="judge")
    def judge(doc, ctx: Context):
        ctx.headers["verdict"] = "low"
        ctx.headers = {**ctx.headers, "reviewer": "bot"}
        return doc

    result = call_actor(judge, {"n": 1}, context=make_context(route=["judge"], headers={"t": "a"}))

    assert [o.headers for o in result.outputs] == [{"t": "a", "verdict": "low", "reviewer": "bot"}]
