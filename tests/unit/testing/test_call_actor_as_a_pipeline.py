"""`call_actor` tells the truth: what a pipeline refuses, it refuses the same way.

Inputs and outputs are encoded and size-checked as a pipeline does (so an output JSON cannot
carry faithfully is `InvalidOutput`, one over the limit `PayloadTooLarge`, with the message
`run()` records), and a batch actor is called with a real batch.
"""

from __future__ import annotations

import datetime

import numpy as np
import pytest

from asya import Context, actor
from asya.envelope import Limits, Reason
from asya.errors import EnvelopeError, PayloadTooLargeError
from asya.testing import call_actor, make_context, run


def test_an_output_json_would_change_fails_as_invalid_output_as_it_does_in_a_pipeline():
    @actor
    def score(doc):
        return {"text": doc["text"], "scores": [0.5, float("nan")]}

    called = call_actor(score, {"text": "a"})
    [final] = run([score], [{"text": "a"}])

    assert called.outputs == ()
    assert called.failure is not None
    assert called.failure.reason is Reason.INVALID_OUTPUT
    assert not called.failure.retryable
    assert "output of 'score' cannot be sent: payload.scores[1] is nan" in called.failure.message
    assert final.status.reason is Reason.INVALID_OUTPUT
    assert final.status.error.message == called.failure.message


def test_a_numpy_output_fails_with_the_numpy_fix_in_call_actor_and_in_run():

    @actor
    def embed(doc):
        return {"vector": np.zeros(3, dtype=np.float32), "norm": np.float32(0.5)}

    called = call_actor(embed, {"text": "a"})
    [final] = run([embed], [{"text": "a"}])

    assert called.failure.reason is Reason.INVALID_OUTPUT
    assert "payload.vector is array(" in called.failure.message
    assert "convert it with .tolist()" in called.failure.message
    assert final.status.reason is Reason.INVALID_OUTPUT
    assert final.status.error.message == called.failure.message


def test_an_output_over_the_payload_limit_fails_as_payload_too_large_as_in_a_pipeline():
    @actor
    def inflate(doc):
        return {"blob": "x" * (5 * 1024 * 1024)}

    called = call_actor(inflate, {})
    [final] = run([inflate], [{}])

    assert called.failure.reason is Reason.PAYLOAD_TOO_LARGE
    assert final.status.reason is Reason.PAYLOAD_TOO_LARGE
    assert final.status.error.message == called.failure.message


def test_call_actor_takes_the_limits_a_deployment_sets():
    @actor
    def echo(doc):
        return {"text": doc["text"] * 10}

    assert call_actor(echo, {"text": "abcde"}).failure is None
    result = call_actor(echo, {"text": "abcde"}, limits=Limits(max_payload_bytes=40))

    assert result.failure.reason is Reason.PAYLOAD_TOO_LARGE


def test_an_input_a_pipeline_could_not_send_raises_as_a_clients_send_would():
    @actor
    def echo(doc):
        return doc

    with pytest.raises(EnvelopeError, match=r"^payload\.when is datetime\.date"):
        call_actor(echo, {"when": datetime.date(2026, 1, 1)})
    with pytest.raises(PayloadTooLargeError):
        call_actor(echo, "x" * 200, limits=Limits(max_payload_bytes=100))


def test_the_handler_gets_and_the_test_sees_what_travels_a_tuple_as_a_list():
    seen = []

    @actor
    def box(doc):
        seen.append(doc)
        return {"box": (1, 2)}

    result = call_actor(box, {"pair": (3, 4)})

    assert seen == [{"pair": [3, 4]}]
    assert result.payloads == [{"box": [1, 2]}]


def test_a_fan_out_child_that_cannot_be_sent_fails_alone_as_in_a_pipeline():
    @actor
    def split(doc):
        yield {"n": 1}
        yield {"n": float("inf")}
        yield {"n": 3}

    called = call_actor(split, {})
    finals = run([split], [{}])

    assert called.payloads == [{"n": 1}, {"n": 3}]
    assert called.failure.reason is Reason.INVALID_OUTPUT
    assert finals.payloads == called.payloads
    assert [f.status.error.message for f in finals.failed] == [called.failure.message]


def test_a_batch_actor_is_called_once_with_the_whole_batch():
    batches = []

    @actor(batch=4)
    def embed(docs):
        batches.append(docs)
        return [{"len": len(d["text"])} for d in docs]

    result = call_actor(embed, [{"text": "a"}, {"text": "bcd"}])

    assert batches == [[{"text": "a"}, {"text": "bcd"}]]
    assert result.payloads == [{"len": 1}, {"len": 3}]
    assert [item.payloads for item in result.items] == [[{"len": 1}], [{"len": 3}]]
    assert result.failure is None


def test_each_item_of_a_batch_keeps_its_own_context_and_its_own_failure_as_in_a_pipeline():
    @actor(batch=4)
    def score(docs):
        return [{"score": d["score"] * 10} for d in docs]

    contexts = [make_context(route=["score", "store"]), make_context(route=["score", "review"])]
    result = call_actor(score, [{"score": 0.5}, {"score": 1e308}], context=contexts)
    finals = run([score], [{"score": 0.5}, {"score": 1e308}])

    kept, refused = result.items
    assert kept.payloads == [{"score": 5.0}]
    assert kept.outputs[0].next == ("store",)
    assert refused.failure.reason is Reason.INVALID_OUTPUT
    assert "payload.score is inf" in refused.failure.message
    assert result.payloads == [{"score": 5.0}]
    assert result.failure == refused.failure
    assert finals.payloads == [{"score": 5.0}]
    assert [f.status.error.message for f in finals.failed] == [refused.failure.message]


def test_a_batch_actor_refuses_what_a_pipeline_never_calls_it_with():
    @actor(batch=2)
    def embed(docs):
        return docs

    with pytest.raises(TypeError, match=r"'embed' is a batch actor: pass the batch"):
        call_actor(embed, {"text": "a"})
    with pytest.raises(ValueError, match=r"1 to 2 payloads.*got 3"):
        call_actor(embed, [1, 2, 3])
    with pytest.raises(ValueError, match=r"1 to 2 payloads.*got 0"):
        call_actor(embed, [])
    with pytest.raises(ValueError, match="one context per payload, got 1"):
        call_actor(embed, [1, 2], context=[make_context(route=["embed"])])
    with pytest.raises(EnvelopeError, match=r"^payload\[1\]\.x is nan"):
        call_actor(embed, [{"x": 1.0}, {"x": float("nan")}])


def test_a_list_of_contexts_is_refused_for_an_actor_that_does_not_batch():
    @actor
    def judge(doc, ctx: Context):
        return doc

    with pytest.raises(TypeError, match="'judge' is not a batch actor"):
        call_actor(judge, {}, context=[make_context(route=["judge"])])
