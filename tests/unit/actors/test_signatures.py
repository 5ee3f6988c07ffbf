"""Which handler signatures `@actor` understands, and that it refuses the rest when decorating.

This module uses `from __future__ import annotations`, so every annotation below is a string:
the case where a `Context` parameter used to go unrecognised.
"""

from __future__ import annotations

import pytest

from asya import Context, actor
from asya import Context as Ctx
from asya.actor import spec_of
from asya.errors import ActorDefinitionError
from asya.handler import LocalInvoker
from asya.outcome import Emitted, Success
from tests.factories import envelope


def judge(doc, verdict: Context):
    verdict.route.next[:0] = ["refine"]
    return doc


def judge_aliased(doc, c: Ctx):
    c.route.next[:0] = ["refine"]
    return doc


def judge_with_unresolvable_payload_annotation(doc: pd.DataFrame, c: Context):  # noqa: F821
    return c.id


def judge_spelled_out(doc, c: asya.Context):  # noqa: F821
    return c.actor


def judge_optional(doc, c: Context | None = None):
    return c is not None


def plain_with_options(doc, limit=10, *args, **kwargs):
    return doc


@pytest.mark.parametrize(
    ("handler", "takes_context"),
    [
        pytest.param(judge, True, id="string-annotation-any-name"),
        pytest.param(judge_aliased, True, id="imported-under-another-name"),
        pytest.param(judge_with_unresolvable_payload_annotation, True, id="other-name-unresolved"),
        pytest.param(judge_spelled_out, True, id="asya-dot-context"),
        pytest.param(judge_optional, True, id="context-or-none"),
        pytest.param(plain_with_options, False, id="defaults-and-variadics"),
    ],
)
def test_a_context_parameter_is_recognised_by_its_annotation_whatever_its_name(
    handler, takes_context
):
    assert spec_of(actor(name="x")(handler)).takes_context is takes_context


async def test_a_handler_with_an_aliased_context_is_called_with_one():
    invoker = LocalInvoker(spec_of(actor(name="x")(judge_aliased)))

    outcomes = await invoker.invoke([envelope("x", ["store"], payload={"n": 1})])
    await invoker.aclose()

    assert outcomes == [Success(outputs=(Emitted(payload={"n": 1}, next=("refine", "store")),))]


def test_a_class_call_with_an_annotated_context_is_recognised():
    @actor(name="x")
    class Judge:
        def __call__(self, doc, verdict: Context):
            return doc

    assert spec_of(Judge).takes_context is True


def needs_extra(doc, extra):
    return doc


def needs_keyword(doc, *, flag):
    return doc


def context_keyword_only(doc, *, ctx: Context):
    return doc


def context_third(doc, limit=1, ctx: Context | None = None):
    return doc


def context_first(ctx: Context):
    return ctx


def payloads_only_variadic(*docs):
    return docs


def unresolvable_second(doc, c: Ctxx):  # noqa: F821
    return doc


def named_ctx_but_annotated_otherwise(doc, ctx: dict):
    return doc


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        pytest.param(needs_extra, "parameter 'extra' has no default and is not a Context", id="x"),
        pytest.param(needs_keyword, "parameter 'flag' has no default", id="keyword-only"),
        pytest.param(
            context_keyword_only,
            "Context parameter 'ctx' must be the second positional parameter",
            id="context-keyword-only",
        ),
        pytest.param(
            context_third,
            "Context parameter 'ctx' must be the second positional parameter",
            id="context-third",
        ),
        pytest.param(
            context_first, "'ctx' is annotated Context but takes the payload", id="context-first"
        ),
        pytest.param(
            payloads_only_variadic,
            "the payload must be the first positional parameter",
            id="variadic-only",
        ),
        pytest.param(
            unresolvable_second,
            "parameter 'c' has no default and is not a Context (its annotation 'Ctxx' did not"
            " resolve)",
            id="unresolvable",
        ),
        pytest.param(
            named_ctx_but_annotated_otherwise,
            "parameter 'ctx' has no default and is not a Context",
            id="ctx-annotated-dict",
        ),
    ],
)
def test_a_signature_asya_cannot_call_fails_at_decoration_naming_the_parameter(handler, expected):
    with pytest.raises(ActorDefinitionError) as caught:
        actor(name="x")(handler)

    assert expected in str(caught.value)
    assert "a handler takes (payload) or (payload, ctx)" in str(caught.value)
    assert caught.value.actor == "x"


def test_a_class_call_with_an_extra_required_parameter_fails_at_decoration():
    with pytest.raises(ActorDefinitionError, match="parameter 'extra' has no default"):

        @actor(name="x")
        class Model:
            def __call__(self, doc, extra):
                return doc


def test_a_batch_handler_with_a_second_required_parameter_fails_at_decoration():
    with pytest.raises(ActorDefinitionError, match="parameter 'size' has no default"):

        @actor(name="x", batch=8)
        def embed(docs, size):
            return docs


def test_a_batch_handler_annotated_with_one_context_is_told_to_take_a_list():
    with pytest.raises(ActorDefinitionError, match=r"annotate 'c' list\[Context\]"):

        @actor(name="x", batch=8)
        def embed(docs, c: Context):
            return docs
