"""The triage pipeline's own tests: `pytest examples/first-day`.

Decorated actors stay plain Python (`Embed()(docs)` works too); `call_actor` calls one actor as
a pipeline would — a batch actor with a real batch, its outputs encoded as JSON, its retry
policy deciding what is retried; `run` sends payloads through the whole pipeline in memory,
with `asya dev`'s own runner (retrying at once), and returns every final envelope.
"""

from __future__ import annotations

from pathlib import Path

from triage import Classify, Embed, clean

from asya.envelope import Reason
from asya.testing import call_actor, run

APP = str(Path(__file__).parent)
CLEAR = {"ticket": "T-1", "subject": "VPN", "body": "The VPN disconnects every few minutes."}
UNCLEAR = {"ticket": "T-2", "subject": "Hi", "body": "Who organises the summer party?"}


def test_a_ticket_with_no_text_fails_at_once_without_retries():
    result = call_actor(clean, {"ticket": "T-0", "subject": " ", "body": ""})

    assert result.failure is not None
    assert result.failure.reason == Reason.HANDLER_ERROR
    assert not result.failure.retryable


def test_markup_and_extra_whitespace_are_cleaned_away():
    result = call_actor(clean, {"ticket": "T-3", "subject": "Wifi ", "body": "drops <b>again</b>"})

    assert result.payloads == [{"ticket": "T-3", "text": "Wifi drops again"}]


def test_a_batch_of_tickets_gets_one_json_ready_embedding_each():
    docs = [{"ticket": "T-1", "text": "vpn drops"}, {"ticket": "T-2", "text": "printer jams"}]

    result = call_actor(Embed, docs)  # a numpy value in an output would fail as InvalidOutput

    assert result.failure is None
    assert [doc["ticket"] for doc in result.payloads] == ["T-1", "T-2"]
    assert all(type(x) is float for doc in result.payloads for x in doc["embedding"])


def test_a_dropped_classifier_request_fails_the_batch_and_is_retried():
    [embedded] = call_actor(Embed, [{"ticket": "T-1", "text": "vpn drops"}]).payloads

    result = call_actor(Classify, [embedded])  # a fresh service: its first request is dropped

    assert result.failure is not None
    assert (result.failure.type, result.failure.retryable) == ("builtins.ConnectionError", True)


def test_a_clear_ticket_is_labelled_and_an_unclear_one_goes_to_human_review():
    results = run(APP, [CLEAR, UNCLEAR])

    assert results.ok
    assert [final.route.prev for final in results.finals] == [
        ("clean", "embed", "classify"),
        ("clean", "embed", "classify", "human-review"),
    ]
    assert [(p["label"], p["needs_review"]) for p in results.payloads] == [
        ("network", False),
        ("access", True),
    ]


def test_the_classifier_services_dropped_request_is_retried():
    results = run(APP, [CLEAR])

    [final] = results.finals
    assert final.status.phase == "succeeded"
    assert [(r.actor, r.type) for r in final.status.retries] == [
        ("classify", "builtins.ConnectionError")
    ]
