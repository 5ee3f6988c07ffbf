"""`asya.testing`: build a Context for a direct call, or call an actor as asya would."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from asya import Context, PermanentError, actor
from asya.envelope import Reason
from asya.errors import EnvelopeError
from asya.outcome import Emitted
from asya.retry import RetryPolicy
from asya.testing import CallResult, acall_actor, call_actor, make_context


def test_make_context_puts_the_first_route_name_in_curr_and_the_rest_in_next():
    ctx = make_context(
        route=["judge", "store"],
        prev=["clean"],
        headers={"tenant": "a"},
        attempt=2,
        max_attempts=5,
        id="e7",
        parent_id="e6",
        deadline_at=datetime(2026, 1, 1, tzinfo=UTC),
    )

    assert (ctx.id, ctx.parent_id, ctx.actor, ctx.attempt, ctx.max_attempts) == (
        "e7",
        "e6",
        "judge",
        2,
        5,
    )
    assert (ctx.route.prev, ctx.route.curr, ctx.route.next) == (("clean",), "judge", ["store"])
    assert (ctx.headers, ctx.deadline_at) == ({"tenant": "a"}, datetime(2026, 1, 1, tzinfo=UTC))


def test_a_decorated_function_can_be_called_directly_with_a_made_context():
    @actor
    def judge(doc, ctx: Context):
        ctx.route.next[:0] = ["refine"]
        return doc

    ctx = make_context(route=["judge", "store"])
    judge({"score": 0.2}, ctx)

    assert ctx.route.next == ["refine", "store"]


def test_make_context_refuses_an_empty_route():
    with pytest.raises(EnvelopeError):
        make_context(route=[])


def test_call_actor_returns_each_payload_with_the_route_it_leaves_with():
    @actor
    def judge(doc, ctx: Context):
        if doc["score"] < 0.7:
            ctx.route.next[:0] = ["refine", "judge"]
        return doc

    result = call_actor(judge, {"score": 0.2}, context=make_context(route=["judge", "store"]))

    assert result == CallResult(
        outputs=(Emitted(payload={"score": 0.2}, next=("refine", "judge", "store")),)
    )


def test_call_actor_gives_the_handler_the_actors_name_and_retry_policy_by_default():
    @actor(retry=RetryPolicy(max_attempts=4))
    def judge(doc, ctx: Context):
        return {"actor": ctx.actor, "max_attempts": ctx.max_attempts}

    assert call_actor(judge, {}).payloads == [{"actor": "judge", "max_attempts": 4}]


def test_call_actor_reports_a_generators_children_as_a_fan_out():
    @actor
    def split(doc):
        yield from doc["parts"]

    result = call_actor(split, {"parts": ["a", "b"]})

    assert (result.payloads, result.fan_out) == (["a", "b"], True)


def test_call_actor_on_a_class_instantiates_it_and_calls_it():
    @actor
    class Scorer:
        def __init__(self):
            self.bias = 10

        def __call__(self, doc):
            return doc["n"] + self.bias

    assert call_actor(Scorer, {"n": 1}).payloads == [11]


def test_call_actor_calls_a_batch_actor_with_the_batch_it_is_given():
    @actor(batch=8)
    def embed(docs):
        return [len(docs)]

    assert call_actor(embed, [{"text": "a"}]).payloads == [1]


def test_call_actor_reports_a_failure_as_asya_would_record_it():
    @actor
    def refuses(doc):
        raise PermanentError("no text")

    result = call_actor(refuses, {})

    assert result.outputs == ()
    assert result.failure is not None
    assert (result.failure.reason, result.failure.type, result.failure.message) == (
        Reason.HANDLER_ERROR,
        "asya.errors.PermanentError",
        "no text",
    )
    assert result.failure.retryable is False


def test_returning_none_ends_the_envelope_with_no_outputs():
    def drop(doc):
        return None

    assert call_actor(drop, {}) == CallResult()


async def test_acall_actor_runs_inside_an_async_test():
    @actor
    async def double(doc):
        await asyncio.sleep(0)
        return doc * 2

    assert (await acall_actor(double, 21)).payloads == [42]


async def test_call_actor_inside_an_event_loop_says_to_await_acall_actor():
    with pytest.raises(RuntimeError, match=r"use await acall_actor\(...\)"):
        call_actor(lambda doc: doc, {})
