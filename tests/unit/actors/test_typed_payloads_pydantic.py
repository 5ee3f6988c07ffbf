"""Typed payloads with pydantic models: validated by the model's own `model_validate`, dumped
by `model_dump(mode="json")`; asya does not depend on pydantic, the user's code does."""

from __future__ import annotations

from datetime import date

import pytest

from asya import actor
from asya.actor import spec_of
from asya.envelope import Reason
from asya.handler import LocalInvoker
from asya.payload_types import ModelKind
from tests.factories import envelope

pydantic = pytest.importorskip("pydantic")


class Review(pydantic.BaseModel):
    text: str
    stars: int = pydantic.Field(ge=1, le=5)
    on: date | None = None


class Verdict(pydantic.BaseModel):
    keep: bool
    scores: list[float] = []


async def call(target, *payloads):
    invoker = LocalInvoker(spec_of(target))
    envelopes = [envelope("x", ["next"], id=f"e{i}", payload=p) for i, p in enumerate(payloads)]
    try:
        return await invoker.invoke(envelopes)
    finally:
        await invoker.aclose()


async def test_a_pydantic_handler_gets_a_validated_model_and_its_returned_model_leaves_as_json():
    seen = []

    @actor(name="x")
    def judge(review: Review) -> Verdict:
        seen.append(review)
        return Verdict(keep=review.stars >= 3, scores=[0.5])

    [outcome] = await call(judge, {"text": "ok", "stars": "4", "on": "2026-01-02"})

    assert spec_of(judge).payload_type.kind is ModelKind.PYDANTIC
    assert seen == [Review(text="ok", stars=4, on=date(2026, 1, 2))]
    assert outcome.outputs[0].payload == {"keep": True, "scores": [0.5]}


async def test_a_payload_the_model_refuses_fails_permanently_naming_the_field():
    @actor(name="x")
    def judge(review: Review) -> Verdict:
        return Verdict(keep=True)

    [outcome] = await call(judge, {"text": "ok", "stars": 9})

    assert (outcome.reason, outcome.retryable) == (Reason.MALFORMED_ENVELOPE, False)
    assert outcome.message.startswith("'x' takes a Review (pydantic model)")
    assert outcome.message.endswith("payload.stars: Input should be less than or equal to 5")


async def test_a_returned_model_holding_something_json_cannot_carry_names_where_it_sits():
    @actor(name="x")
    def judge(review: Review) -> Verdict:
        verdict = Verdict(keep=True, scores=[0.5])
        verdict.scores.append(object())  # pydantic checks fields when built, not later
        return verdict

    [outcome] = await call(judge, {"text": "ok", "stars": 4})

    assert outcome.reason is Reason.INVALID_OUTPUT
    assert outcome.message == (
        "'x': the output Verdict does not convert: payload.scores[1]: a builtins.object cannot"
        " be converted"
    )


async def test_a_batch_of_pydantic_models_fails_only_the_item_that_does_not_fit():
    @actor(name="x", batch=8)
    def judge(reviews: list[Review]) -> list[Verdict]:
        return [Verdict(keep=r.stars >= 3) for r in reviews]

    good, bad = await call(judge, {"text": "ok", "stars": 4}, {"stars": 2})

    assert good.outputs[0].payload == {"keep": True, "scores": []}
    assert bad.reason is Reason.MALFORMED_ENVELOPE
    assert bad.message.endswith("payload.text: Field required")
