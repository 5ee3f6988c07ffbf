"""Typed payloads: a handler annotated with a dataclass or a msgspec Struct gets one, built and
validated from the JSON payload, and may return one; what does not fit fails naming the field.

(pydantic models: `test_typed_payloads_pydantic.py`.) The models live at module level: this
module's annotations are strings, resolved in the module's globals as users' modules are.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import msgspec
import pytest

from asya import Context, actor
from asya.actor import spec_of
from asya.envelope import Reason
from asya.errors import ActorDefinitionError
from asya.handler import LocalInvoker
from asya.outcome import Failure
from asya.payload_types import ModelKind
from asya.testing import run
from tests.factories import envelope


@dataclasses.dataclass
class Doc:
    text: str
    lang: str = "en"


class Scored(msgspec.Struct, frozen=True):
    text: str
    score: float
    tags: list[str] = []


@dataclasses.dataclass
class Stamped:
    text: str
    at: datetime


class Float32:
    """Stands in for numpy.float32 (numpy is not a test dependency)."""

    __module__ = "numpy"


async def call(target, *payloads):
    invoker = LocalInvoker(spec_of(target))
    envelopes = [envelope("x", ["next"], id=f"e{i}", payload=p) for i, p in enumerate(payloads)]
    try:
        return await invoker.invoke(envelopes)
    finally:
        await invoker.aclose()


def test_the_payload_type_is_found_once_when_decorating():
    @actor(name="x")
    def typed(doc: Doc) -> Doc:
        return doc

    @actor(name="y")
    def plain(doc: dict) -> dict:
        return doc

    @actor(name="z", batch=8)
    def batched(docs: list[Scored]) -> list[Scored]:
        return docs

    assert (spec_of(typed).payload_type.model, spec_of(typed).payload_type.kind) == (
        Doc,
        ModelKind.DATACLASS,
    )
    assert spec_of(plain).payload_type is None
    assert spec_of(batched).payload_type.model is Scored


async def test_a_dataclass_handler_gets_an_instance_and_its_returned_struct_leaves_as_data():
    seen = []

    @actor(name="x")
    def score(doc: Doc) -> Scored:
        seen.append(doc)
        return Scored(text=doc.text, score=0.5, tags=[doc.lang])

    [outcome] = await call(score, {"text": "hi", "lang": "fr"})

    assert seen == [Doc(text="hi", lang="fr")]
    assert outcome.outputs[0].payload == {"text": "hi", "score": 0.5, "tags": ["fr"]}


async def test_a_payload_that_does_not_fit_fails_permanently_naming_the_field_and_the_model():
    calls = []

    @actor(name="x")
    def score(doc: Doc) -> Doc:
        calls.append(doc)
        return doc

    wrong_type, missing, not_an_object = await call(score, {"text": 5}, {"lang": "en"}, "hi")

    assert calls == []
    for outcome in (wrong_type, missing, not_an_object):
        assert isinstance(outcome, Failure)
        assert (outcome.reason, outcome.type, outcome.retryable) == (
            Reason.MALFORMED_ENVELOPE,
            "MalformedEnvelope",
            False,
        )
        assert outcome.message.startswith(
            "'x' takes a Doc (dataclass) and the payload does not fit it: payload"
        )
    assert wrong_type.message.endswith("payload.text: Expected `str`, got `int`")
    assert missing.message.endswith("payload: Object missing required field `text`")
    assert not_an_object.message.endswith("payload: Expected `object`, got `str`")


async def test_a_returned_model_whose_field_holds_the_wrong_type_is_invalid_output_naming_it():
    @actor(name="x")
    def score(doc: Doc) -> Scored:
        return Scored(text=doc.text, score="high")

    [outcome] = await call(score, {"text": "hi"})

    assert (outcome.reason, outcome.retryable) == (Reason.INVALID_OUTPUT, False)
    assert outcome.message == (
        "'x': the output Scored does not convert: payload.score: Expected `float`, got `str`"
    )


async def test_a_returned_model_holding_something_json_cannot_carry_names_where_it_sits():
    @actor(name="x")
    def score(doc: Doc) -> Scored:
        return Scored(text=doc.text, score=0.5, tags=["ok", Float32()])

    [outcome] = await call(score, {"text": "hi"})

    assert outcome.reason is Reason.INVALID_OUTPUT
    assert outcome.message == (
        "'x': the output Scored does not convert: payload.tags[1]: a numpy.Float32 cannot be"
        " converted (call .item() on a numpy scalar, .tolist() on an array)"
    )


async def test_a_generator_may_yield_models():
    @actor(name="x")
    def split(doc: Doc):
        for word in doc.text.split():
            yield Doc(text=word)

    [outcome] = await call(split, {"text": "a b"})

    assert [o.payload for o in outcome.outputs] == [
        {"text": "a", "lang": "en"},
        {"text": "b", "lang": "en"},
    ]


async def test_a_datetime_field_travels_as_iso_text_and_is_a_datetime_again_at_the_next_model():
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    @actor(name="x")
    def stamp(doc: Doc) -> Stamped:
        return Stamped(text=doc.text, at=at)

    @actor(name="y")
    def check(doc: Stamped) -> dict:
        return {"year": doc.at.year, "aware": doc.at.tzinfo is not None}

    [stamped] = await call(stamp, {"text": "hi"})
    [checked] = await call(check, stamped.outputs[0].payload)

    assert stamped.outputs[0].payload == {"text": "hi", "at": "2026-01-02T03:04:05Z"}
    assert checked.outputs[0].payload == {"year": 2026, "aware": True}


async def test_a_batch_of_models_converts_each_item_and_one_that_does_not_fit_fails_alone():
    seen = []

    @actor(name="x", batch=8)
    def score(docs: list[Doc], ctxs: list[Context]) -> list[Scored]:
        seen.append([d.text for d in docs])
        ctxs[-1].route.next = ["review"]
        return [Scored(text=d.text, score=len(d.text)) for d in docs]

    first, bad, last = await call(score, {"text": "a"}, {"text": None}, {"text": "ccc"})

    assert seen == [["a", "ccc"]]  # the misfit was never part of the call
    assert bad.reason is Reason.MALFORMED_ENVELOPE
    assert "payload.text: Expected `str`, got `null`" in bad.message
    assert (first.outputs[0].payload, first.outputs[0].next) == (
        {"text": "a", "score": 1.0, "tags": []},
        ("next",),
    )
    assert (last.outputs[0].payload["text"], last.outputs[0].next) == ("ccc", ("review",))


def test_a_batch_handler_annotated_with_one_model_is_told_to_take_a_list():
    with pytest.raises(ActorDefinitionError, match=r"annotate it list\[Doc\]"):

        @actor(name="x", batch=8)
        def score(docs: Doc) -> list[Doc]:
            return [docs]


def test_typed_actors_in_a_pipeline_get_their_models_and_a_misfit_fails_at_the_first():
    @actor
    def clean(doc: Doc) -> Doc:
        return Doc(text=doc.text.strip(), lang=doc.lang)

    @actor(batch=4)
    def score(docs: list[Doc]) -> list[Scored]:
        return [Scored(text=d.text, score=len(d.text) / 10, tags=[d.lang]) for d in docs]

    results = run([clean, score], [{"text": " great "}, {"txt": "typo"}], timeout_s=30)

    assert results.payloads == [{"text": "great", "score": 0.5, "tags": ["en"]}]
    [misfit] = results.failed
    assert (misfit.status.reason, misfit.status.actor) == (Reason.MALFORMED_ENVELOPE, "clean")
    assert misfit.payload == {"txt": "typo"}
    assert "payload: Object missing required field `text`" in misfit.status.error.message
