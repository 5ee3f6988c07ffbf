"""examples/embeddings: support messages embedded in batches by a real (small) model, matched
to topics, and the ones that match none sent to review."""

from __future__ import annotations

import json
import math

import pytest

from asya.testing import call_actor, make_context, run
from tests.examples.commands import EXAMPLES, asya_dev, render

APP = EXAMPLES / "embeddings"
INPUTS = [json.loads(line) for line in (APP / "inputs.jsonl").read_text().splitlines()]
OFF_TOPIC = {"t09", "t14", "t19", "t24", "t25"}
TOPICS = {
    "billing": {"t01", "t05", "t10", "t15", "t20"},
    "shipping": {"t02", "t06", "t11", "t16", "t21", "t26"},
    "account": {"t03", "t07", "t12", "t17", "t22"},
    "app": {"t04", "t08", "t13", "t18", "t23"},
}


@pytest.fixture
def embeddings(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from embeddings import embed, lsa, match

    return lsa, embed, match


def by_ticket(payloads):
    return {p["ticket"]: p for p in payloads}


def test_asya_dev_names_every_messages_topic_and_sends_the_off_topic_ones_to_review():
    code, finals, stderr = asya_dev("embeddings", "inputs.jsonl")

    payloads = by_ticket(f["payload"] for f in finals)
    reviewed = {f["payload"]["ticket"] for f in finals if "review" in f["route"]["prev"]}
    assert code == 0, stderr
    assert {f["status"]["phase"] for f in finals} == {"succeeded"}
    assert len(finals) == len(INPUTS)
    assert reviewed == OFF_TOPIC
    assert {t for t, p in payloads.items() if p.get("needs_review")} == OFF_TOPIC
    for topic, tickets in TOPICS.items():
        assert {payloads[t]["topic"] for t in tickets} == {topic}
        assert min(payloads[t]["similarity"] for t in tickets) >= 0.4
    assert max(payloads[t]["similarity"] for t in OFF_TOPIC) < 0.2


def test_pytest_runs_the_same_pipeline_with_the_same_outcome():
    results = run(str(APP), INPUTS)

    assert results.ok
    assert {p["ticket"] for p in results.payloads if p.get("needs_review")} == OFF_TOPIC
    assert {p["ticket"]: p["topic"] for p in results.payloads if p["ticket"] not in OFF_TOPIC} == {
        ticket: topic for topic, tickets in TOPICS.items() for ticket in tickets
    }


def test_a_batch_gets_one_json_native_embedding_of_unit_length_per_message(embeddings):
    _, embed, _ = embeddings
    docs = [{"text": "My parcel is lost"}, {"text": "Refund my payment"}, {"text": "banana"}]

    out = embed.Embed()(docs)

    assert [d["text"] for d in out] == [d["text"] for d in docs]
    for doc in out:
        assert len(doc["embedding"]) == 16
        assert all(type(x) is float for x in doc["embedding"])
    norms = [math.fsum(x * x for x in d["embedding"]) for d in out]
    assert norms[:2] == pytest.approx([1.0, 1.0], abs=1e-4)
    assert (norms[2], out[2]["coverage"]) == (0.0, 0.0)  # no known word: the zero vector


def test_the_model_is_deterministic_and_puts_like_messages_together(embeddings):
    lsa, _, _ = embeddings
    texts = [text for _, text in lsa.read_corpus()]
    probes = ["the parcel never arrived", "my delivery is late", "refund the double charge"]

    first, second = lsa.Lsa.fit(texts).embed(probes), lsa.Lsa.fit(texts).embed(probes)

    assert (first == second).all()
    assert first[0] @ first[1] > first[0] @ first[2]


def test_match_routes_a_low_similarity_message_to_review_and_a_clear_one_onward(embeddings):
    _, embed, match = embeddings
    unclear, clear = embed.Embed()([{"text": "gift cards?"}, {"text": "refund my invoice"}])
    route = ["match", "store"]

    unsure = call_actor(match.Match, unclear, context=make_context(route=route))
    sure = call_actor(match.Match, clear, context=make_context(route=route))

    assert unsure.outputs[0].next == ("review", "store")
    assert sure.outputs[0].next == ("store",)
    assert sure.payloads[0]["topic"] == "billing"


def test_render_writes_the_embedder_as_a_batched_gpu_actor(tmp_path):
    values, objects = render("embeddings", tmp_path=tmp_path)

    embed = values["actors"]["embed"]
    assert embed["handler"] == "embeddings.embed:Embed"
    assert (embed["resources"], embed["batch"]) == ({"gpus": 1}, {"size": 16, "waitMs": 20})
    assert sorted(o["metadata"]["name"] for o in objects) == ["embed", "match", "review"]
