"""Values a handler leaves in its context must be strings: anything else is InvalidOutput."""

from __future__ import annotations

import pytest

from asya import Context, actor
from asya.envelope import Reason
from asya.testing import acall_actor


@pytest.mark.parametrize(
    "bad", [5, None, ["echo"], {"to": "echo"}], ids=["int", "none", "list", "dict"]
)
async def test_a_non_string_in_route_next_fails_the_call_as_invalid_output(bad):
    @actor
    def router(doc, ctx: Context):
        ctx.route.next.append(bad)
        return doc

    result = await acall_actor(router, {"n": 1})

    assert result.failure is not None
    assert result.failure.reason is Reason.INVALID_OUTPUT
    assert result.failure.retryable is False
    assert (
        result.failure.message
        == f"'router': route.next must hold actor names (strings), got {bad!r}"
    )


async def test_a_non_string_header_fails_the_call_as_invalid_output():
    @actor
    def tagger(doc, ctx: Context):
        ctx.headers["tries"] = 3
        return doc

    result = await acall_actor(tagger, {"n": 1})

    assert result.failure is not None
    assert result.failure.reason is Reason.INVALID_OUTPUT
    assert result.failure.message == "'tagger': headers must map strings to strings, got 'tries': 3"


async def test_a_generator_that_routes_to_a_non_string_fails_as_a_whole():
    @actor
    def split(doc, ctx: Context):
        yield {"part": 1}
        ctx.route.next[:] = [7]
        yield {"part": 2}

    result = await acall_actor(split, {"n": 1})

    assert result.outputs == ()
    assert result.failure is not None
    assert result.failure.reason is Reason.INVALID_OUTPUT
