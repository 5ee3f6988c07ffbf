"""The quickstart's own tests: its actors called one at a time, and the whole pipeline run.

Run them with `pytest examples/quickstart`. `call_actor` calls one actor exactly as asya would
(its options, its retry policy, a generator's fan-out); `run` sends payloads through the whole
pipeline in memory — the runner `asya dev` uses — and returns every final envelope. Discovery
skips `test_*` modules, so this file is not part of the app.
"""

from __future__ import annotations

from pathlib import Path

from asya.envelope import Reason
from asya.testing import call_actor, make_context, run

from .text import normalize, split

APP = str(Path(__file__).parent)
LONG_REVIEW = " ".join(f"Day {i} with this blender was great and very quiet." for i in range(15))


def test_a_long_review_is_routed_through_split():
    result = call_actor(
        normalize, {"text": LONG_REVIEW}, context=make_context(route=["normalize", "score"])
    )

    assert [output.next for output in result.outputs] == [("split", "score")]


def test_split_yields_chunks_that_cover_the_text():
    result = call_actor(split, {"text": LONG_REVIEW})

    assert result.fan_out
    assert [chunk["chunk"] for chunk in result.payloads] == [1, 2, 3]
    assert " ".join(chunk["text"] for chunk in result.payloads) == LONG_REVIEW


def test_every_chunk_of_a_long_review_is_scored_on_its_own():
    results = run(APP, [{"text": LONG_REVIEW}])

    assert [doc["chunk"] for doc in results.payloads] == [1, 2, 3]
    assert {doc["sentiment"] for doc in results.payloads} == {"positive"}


def test_an_unsure_score_takes_the_review_detour():
    results = run(APP, [{"text": "The food was good, but the service was terrible."}])

    [final] = results.finals
    assert final.route.prev == ("normalize", "detect-language", "score", "review")
    assert final.payload["review"] == "mixed"


def test_a_review_without_text_fails_at_once_with_the_reason():
    results = run(APP, [{"text": "Lovely."}, {"stars": 5}])

    assert [doc["text"] for doc in results.payloads] == ["Lovely."]
    assert [(f.status.reason, f.status.actor, f.status.attempt) for f in results.failed] == [
        (Reason.HANDLER_ERROR, "normalize", 1)
    ]
