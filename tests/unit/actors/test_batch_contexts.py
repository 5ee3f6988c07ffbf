"""A batch handler may take one `Context` per payload and route each item on its own.

`def __call__(self, docs, ctxs: list[Context])`: `ctxs[i]` belongs to `docs[i]`, and what the
handler leaves in its route and headers goes with `results[i]` alone. An item whose output or
context cannot leave the call fails alone; its batch-mates go on.
"""

from __future__ import annotations

from collections.abc import Sequence
from unittest import mock

import pytest

import asya
from asya import Context, PermanentError, actor
from asya.actor import spec_of
from asya.envelope import Reason
from asya.errors import ActorDefinitionError
from asya.handler import LocalInvoker
from asya.outcome import Emitted, Failure, Success
from asya.retry import RetryPolicy
from asya.testing import run
from tests.factories import envelope


async def call(target, *envelopes):
    invoker = LocalInvoker(spec_of(target))
    try:
        return await invoker.invoke(list(envelopes))
    finally:
        await invoker.aclose()


def items(*scores: float, next: Sequence[str] = ("store",)) -> list:
    return [
        envelope("classify", next, id=f"e{i}", payload={"i": i, "score": s})
        for i, s in enumerate(scores)
    ]


def to_review_below(threshold: float):
    def route(docs: list[dict], ctxs: list[Context]) -> list[dict]:
        for doc, ctx in zip(docs, ctxs, strict=True):
            if doc["score"] < threshold:
                ctx.route.next = ["review", *ctx.route.next]
                ctx.headers["review"] = "low-confidence"
        return docs

    return route


async def test_each_item_of_a_batch_leaves_with_the_route_and_headers_its_own_context_got():
    classify = actor(name="classify", batch=8)(to_review_below(0.5))

    outcomes = await call(classify, *items(0.9, 0.2, 0.7, 0.1))

    assert [(o.outputs[0].next, o.outputs[0].headers) for o in outcomes] == [
        (("store",), {}),
        (("review", "store"), {"review": "low-confidence"}),
        (("store",), {}),
        (("review", "store"), {"review": "low-confidence"}),
    ]


async def test_a_class_batch_handler_gets_each_items_ids_and_attempt():
    seen = []

    @actor(name="classify", batch=8, retry=RetryPolicy(max_attempts=4))
    class Classify:
        def __call__(self, docs: list[dict], ctxs: list[Context]) -> list[dict]:
            seen.extend((c.id, c.attempt, c.max_attempts, c.route.curr) for c in ctxs)
            return docs

    first = envelope("classify", id="a")
    second = envelope("classify", id="b", attempt=3)
    await call(Classify, first, second)

    assert seen == [("a", 1, 4, "classify"), ("b", 3, 4, "classify")]


async def test_an_async_batch_handler_routes_per_item_too():
    @actor(name="classify", batch=8)
    async def classify(docs, ctxs: list[Context]):
        ctxs[1].route.next = []
        return docs

    outcomes = await call(classify, *items(0.9, 0.9))

    assert [o.outputs[0].next for o in outcomes] == [("store",), ()]


async def test_reordering_the_list_of_contexts_cannot_swap_two_items_routes():
    @actor(name="classify", batch=8)
    def classify(docs, ctxs: list[Context]):
        ctxs[0].route.next = ["review"]
        ctxs.reverse()
        return docs

    outcomes = await call(classify, *items(0.9, 0.9))

    assert [o.outputs[0].next for o in outcomes] == [("review",), ("store",)]


async def test_an_item_that_leaves_a_non_string_in_its_route_fails_alone():
    @actor(name="classify", batch=8)
    def classify(docs, ctxs: list[Context]):
        ctxs[1].route.next = [7]
        return docs

    outcomes = await call(classify, *items(0.9, 0.9, 0.9))

    assert isinstance(outcomes[1], Failure)
    assert (outcomes[1].reason, outcomes[1].retryable) == (Reason.INVALID_OUTPUT, False)
    assert "route.next must hold actor names (strings), got 7" in outcomes[1].message
    assert [o.outputs[0].payload["i"] for o in (outcomes[0], outcomes[2])] == [0, 2]


async def test_an_item_answered_with_an_exception_fails_alone_as_if_its_call_had_raised_it():
    @actor(name="classify", batch=8, retry=RetryPolicy(never_retry=(KeyError,)))
    def classify(docs):
        return [
            ValueError("too long") if d["i"] == 0 else KeyError("lang") if d["i"] == 1 else d
            for d in docs
        ]

    retryable, permanent, fine = await call(classify, *items(0.9, 0.9, 0.9))

    assert (retryable.reason, retryable.type, retryable.message, retryable.retryable) == (
        Reason.HANDLER_ERROR,
        "builtins.ValueError",
        "too long",
        True,
    )
    assert (permanent.type, permanent.retryable) == ("builtins.KeyError", False)
    assert fine.outputs[0].payload == {"i": 2, "score": 0.9}


async def test_an_item_whose_result_is_none_ends_while_its_batch_mates_go_on():
    @actor(name="classify", batch=8)
    def classify(docs, ctxs: list[Context]):
        return [None if d["score"] < 0.5 else d for d in docs]

    outcomes = await call(classify, *items(0.9, 0.1))

    assert outcomes == [
        Success(outputs=(Emitted(payload={"i": 0, "score": 0.9}, next=("store",)),)),
        Success(),
    ]


@pytest.mark.parametrize(
    ("annotation", "names"),
    [
        pytest.param("list[Context]", {"Context": Context}, id="list"),
        pytest.param("Sequence[Context]", {"Context": Context, "Sequence": Sequence}, id="seq"),
        pytest.param("list[asya.Context]", {"asya": asya}, id="spelled-out"),
        # imported under `if TYPE_CHECKING:` only: the annotation stays a string
        pytest.param("'list[Context]'", {}, id="unresolved-string"),
    ],
)
def test_a_list_of_contexts_is_recognised_by_its_annotation(annotation, names):
    namespace = dict(names)
    exec(f"def classify(docs, verdicts: {annotation}): return docs", namespace)

    spec = spec_of(actor(name="classify", batch=8)(namespace["classify"]))

    assert spec.takes_context is True


@pytest.mark.parametrize("param", ["ctxs", "contexts", "ctx"])
def test_an_unannotated_second_parameter_named_for_contexts_takes_them(param):
    namespace: dict = {}
    exec(f"def classify(docs, {param}): return docs", namespace)

    spec = spec_of(actor(name="classify", batch=8)(namespace["classify"]))

    assert spec.takes_context is True


def test_a_list_of_contexts_on_a_handler_that_does_not_batch_points_at_batch():
    with pytest.raises(ActorDefinitionError, match=r"declare @actor\(batch=N\)"):

        @actor(name="x")
        def classify(doc, ctxs: list[Context]):
            return doc


def test_a_batch_payload_parameter_annotated_as_contexts_is_refused():
    with pytest.raises(ActorDefinitionError, match="'ctxs' is annotated Context but takes the"):

        @actor(name="x", batch=8)
        def classify(ctxs: list[Context]):
            return ctxs


def review_pipeline(batch_sizes: list[int]) -> list:
    """A batched classifier that sends its unsure items to a person first, then to `store`.

    It waits for a full batch of 4 (one worker, a long batch wait), so 4 inputs are one call.
    """

    @actor(batch=4, batch_wait_ms=60_000, max_replicas=1)
    class Classify:
        def __call__(self, docs: list[dict], ctxs: list[Context]) -> list[dict]:
            batch_sizes.append(len(docs))
            results = []
            for doc, ctx in zip(docs, ctxs, strict=True):
                if doc.get("poison"):
                    results.append({"score": object()})  # JSON cannot carry it
                    continue
                if not doc["text"]:
                    results.append(PermanentError("no text to classify"))  # this item fails
                    continue
                score = len(doc["text"]) / 10
                if score < 0.5:
                    ctx.route.next = ["review", *ctx.route.next]
                results.append({**doc, "score": score})
            return results

    @actor
    def review(doc: dict) -> dict:
        if doc["text"] == "!":
            raise PermanentError("nothing to review")
        return {**doc, "reviewed": True}

    @actor
    def store(doc: dict) -> dict:
        return {**doc, "stored": True}

    return [Classify, review, store]


def test_a_batched_classifier_sends_its_low_confidence_items_to_review_and_the_rest_on():
    batch_sizes: list[int] = []

    results = run(
        review_pipeline(batch_sizes),
        [{"text": "long enough"}, {"text": "no"}, {"text": "fine text!"}, {"text": "hm"}],
        route=["classify", "store"],
        timeout_s=30,
    )

    assert batch_sizes == [4]  # one call: the items were routed apart within one batch
    assert [(f.payload["text"], f.route.prev) for f in results.succeeded] == [
        ("long enough", ("classify", "store")),
        ("no", ("classify", "review", "store")),
        ("fine text!", ("classify", "store")),
        ("hm", ("classify", "review", "store")),
    ]
    assert [f.payload.get("reviewed", False) for f in results.succeeded] == [
        False,
        True,
        False,
        True,
    ]


def test_poison_and_failing_items_of_a_routed_batch_fail_alone():
    batch_sizes: list[int] = []

    results = run(
        review_pipeline(batch_sizes),
        [{"text": "long enough"}, {"poison": 1}, {"text": ""}, {"text": "!"}],
        route=["classify", "store"],
        timeout_s=30,
    )

    assert batch_sizes == [4]
    assert [f.payload["text"] for f in results.succeeded] == ["long enough"]
    assert [(f.status.reason, f.status.actor, f.status.error.message) for f in results.failed] == [
        (Reason.INVALID_OUTPUT, "classify", mock.ANY),
        (Reason.HANDLER_ERROR, "classify", "no text to classify"),
        (Reason.HANDLER_ERROR, "review", "nothing to review"),
    ]
