"""`@actor`: what it accepts, what it refuses, and what it records."""

from __future__ import annotations

import pytest

from asya import Context, actor
from asya.actor import REGISTRY, CallStyle, spec_of
from asya.errors import ActorDefinitionError
from asya.retry import RetryPolicy


def test_a_decorated_function_stays_a_plain_function_that_tests_can_call():
    @actor
    def clean(doc):
        return {"text": doc["text"].strip()}

    assert clean({"text": " a "}) == {"text": "a"}
    assert REGISTRY.get("clean") is spec_of(clean)


def test_names_default_to_kebab_case_of_the_function_or_class():
    @actor
    def clean_text(doc):
        return doc

    @actor
    class SentimentScorer:
        def __call__(self, doc):
            return doc

    assert spec_of(clean_text).name == "clean-text"
    assert spec_of(SentimentScorer).name == "sentiment-scorer"


@pytest.mark.parametrize(
    ("make", "style", "takes_context"),
    [
        pytest.param(lambda: lambda doc: doc, CallStyle.RETURN, False, id="lambda"),
    ],
)
def test_a_lambda_is_a_function_too(make, style, takes_context):
    spec = spec_of(actor(name="lam")(make()))

    assert (spec.style, spec.takes_context) == (style, takes_context)


def test_call_styles_and_context_are_detected():
    @actor
    def plain(doc):
        return doc

    @actor
    async def awaited(doc, ctx: Context):
        return doc

    @actor
    def gen(doc, ctx):
        yield doc

    @actor
    async def agen(doc):
        yield doc

    @actor
    class Model:
        def __call__(self, doc, context):
            return doc

    found = {s.name: (s.style, s.takes_context, s.is_class) for s in REGISTRY}
    assert found == {
        "plain": (CallStyle.RETURN, False, False),
        "awaited": (CallStyle.ASYNC_RETURN, True, False),
        "gen": (CallStyle.GENERATOR, True, False),
        "agen": (CallStyle.ASYNC_GENERATOR, False, False),
        "model": (CallStyle.RETURN, True, True),
    }


def test_options_are_recorded_as_typed_fields():
    policy = RetryPolicy(max_attempts=5)

    @actor(
        gpus=1,
        batch=32,
        batch_wait_ms=20,
        max_replicas=8,
        min_replicas=1,
        cpu="500m",
        memory="2Gi",
        timeout_s=30,
        concurrency=4,
        retry=policy,
        pool="team-a",
        priority=5,
        queue_length=10,
        activation=2,
        cooldown_s=60,
    )
    def embed(docs):
        return docs

    spec = spec_of(embed)
    assert (spec.batch, spec.batch_wait_ms, spec.timeout_s, spec.concurrency) == (32, 20, 30, 4)
    assert (spec.resources.gpus, spec.resources.cpu, spec.resources.memory) == (1, "500m", "2Gi")
    assert (spec.scaling.min_replicas, spec.scaling.max_replicas) == (1, 8)
    assert (spec.scaling.queue_length, spec.scaling.activation, spec.scaling.cooldown_s) == (
        10,
        2,
        60.0,
    )
    assert (spec.retry, spec.pool, spec.priority) == (policy, "team-a", 5)


def test_an_unknown_option_names_the_closest_valid_one():
    with pytest.raises(ActorDefinitionError, match="unknown option 'gpu'; did you mean 'gpus'"):
        actor(gpu=1)(lambda doc: doc)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param({"concurrency": 0}, "Expected `int` >= 1 - at `$.concurrency`", id="zero"),
        pytest.param({"timeout_s": -1}, "at `$.timeout_s`", id="negative-timeout"),
        pytest.param({"gpus": "two"}, "Expected `int`, got `str` - at `$.gpus`", id="type"),
        pytest.param({"cpu": "lots"}, "at `$.cpu`", id="bad-quantity"),
        pytest.param({"name": "Bad_Name"}, "not a valid actor name", id="bad-name"),
        pytest.param({"name": "error-end"}, "is an end actor", id="end-actor-name"),
        pytest.param({"min_replicas": 5, "max_replicas": 2}, "min_replicas (5) is above", id="mm"),
        pytest.param({"retry": 3}, "retry must be an asya.retry.RetryPolicy", id="retry-type"),
    ],
)
def test_a_bad_option_fails_at_decoration_saying_what_to_fix(options, expected):
    def step(doc):
        return doc

    with pytest.raises(ActorDefinitionError) as caught:
        actor(**options)(step)

    assert expected in str(caught.value)


def test_two_actors_with_one_name_are_refused():
    @actor(name="step")
    def first(doc):
        return doc

    with pytest.raises(ActorDefinitionError, match="actor name 'step' is used by both"):

        @actor(name="step")
        def second(doc):
            return doc


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        pytest.param(
            type("NoCall", (), {}), "needs a __call__(self, payload) method", id="no-call"
        ),
        pytest.param(
            type(
                "NeedsArgs",
                (),
                {"__init__": lambda self, path: None, "__call__": lambda self, doc: doc},
            ),
            "must be constructible without arguments",
            id="init-args",
        ),
        pytest.param(
            lambda: None, "the payload must be the first positional parameter", id="no-params"
        ),
        pytest.param(
            lambda doc, ctx, extra: doc,
            "parameter 'extra' has no default and is not a Context",
            id="extra-param",
        ),
        pytest.param(42, "expected a function or a class", id="not-callable"),
    ],
)
def test_targets_that_cannot_be_handlers_are_refused(target, expected):
    with pytest.raises(ActorDefinitionError) as caught:
        actor(name="x")(target)

    assert expected in str(caught.value)


def test_a_batch_handler_cannot_be_a_generator():
    with pytest.raises(ActorDefinitionError, match="cannot be a generator"):

        @actor(batch=8)
        def embed(docs):
            yield from docs
