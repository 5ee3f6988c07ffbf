"""The quickstart, as a user runs it: `asya dev` from the command line, the pipeline through
`asya.testing.run`, its actors alone, and the example's own tests."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from asya.testing import make_context, run

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"


def asya_dev(input_name, *extra):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "asya.cli",
            "dev",
            str(QUICKSTART),
            "--input",
            str(QUICKSTART / input_name),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )


def test_the_quickstart_prints_one_final_envelope_per_input_and_children_and_a_summary():
    done = asya_dev("inputs.jsonl")

    finals = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0, done.stderr
    assert {f["status"]["phase"] for f in finals} == {"succeeded"}
    assert "actor            envelopes  attempts  retried  failed" in done.stderr
    assert f"final envelopes: {len(finals)} ({len(finals)} succeeded, 0 failed)" in done.stderr


def test_every_review_succeeds_long_ones_chunk_by_chunk_unsure_ones_after_a_second_look():
    inputs = [json.loads(line) for line in (QUICKSTART / "inputs.jsonl").read_text().splitlines()]

    results = run(str(QUICKSTART), inputs)

    children = [f for f in results if f.parent_id]
    reviewed = [f for f in results if "review" in f.route.prev]
    assert len(inputs) >= 50
    assert results.ok
    assert len(results) == len(inputs) - len({c.parent_id for c in children}) + len(children)
    assert children
    assert reviewed
    assert {f.payload["lang"] for f in results} >= {"en", "es", "fr", "de"}


def test_bad_inputs_end_in_error_end_with_their_reasons_and_the_run_exits_non_zero(tmp_path):
    output = tmp_path / "finals.jsonl"
    done = asya_dev("bad-inputs.jsonl", "--output", str(output))

    finals = [json.loads(line) for line in output.read_text().splitlines()]
    reasons = Counter(f["status"]["reason"] for f in finals)
    assert done.returncode == 1
    assert reasons == {
        None: 5,
        "MalformedEnvelope": 3,
        "UnknownActor": 1,
        "HandlerError": 1,
        "Timeout": 1,
        "HopLimitExceeded": 1,
        "DeadlineExceeded": 1,
        "PayloadTooLarge": 1,
    }
    assert "9 failed: DeadlineExceeded 1, HandlerError 1, HopLimitExceeded 1" in done.stderr
    assert done.stdout.count("\n") == len(finals)


def test_allow_failures_turns_the_exit_code_to_zero():
    done = asya_dev("bad-inputs.jsonl", "--allow-failures", "--quiet")

    assert done.returncode == 0
    assert done.stderr == ""


@pytest.fixture
def quickstart(monkeypatch):
    monkeypatch.syspath_prepend(str(QUICKSTART.parent))
    from quickstart import language, review, sentiment, text

    return text, language, sentiment, review


def test_actors_are_plain_python_a_user_can_test_directly(quickstart):
    text, language, sentiment, _ = quickstart
    ctx = make_context(route=["normalize"])

    doc = text.normalize({"text": "  Great   food\u00a0and lovely staff. "}, ctx)
    doc = language.DetectLanguage()(doc)
    doc = sentiment.Score()(doc, ctx)

    assert doc["text"] == "Great food and lovely staff."
    assert doc["lang"] == "en"
    assert doc["sentiment"] == "positive"
    assert ctx.route.next == []


def test_negation_flips_sentiment_until_the_clause_ends(quickstart):
    _, _, sentiment, _ = quickstart
    words = sentiment.load_lexicon(QUICKSTART / "lexicon.tsv")["en"]

    negated, _ = sentiment.polarity(sentiment.tokenize("it was not good"), words, "en")
    after_comma, _ = sentiment.polarity(sentiment.tokenize("no apology, terrible"), words, "en")

    assert negated < 0
    assert after_comma < 0


def test_long_documents_are_split_on_sentences(quickstart):
    text, *_ = quickstart
    ctx = make_context(route=["normalize"])
    long = " ".join(f"Sentence number {i} has five words." for i in range(40))

    routed = text.normalize({"text": long}, ctx)
    chunks = list(text.split(routed, ctx))

    assert ctx.route.next == ["split"]
    assert len(chunks) == 4
    assert [c["chunk"] for c in chunks] == [1, 2, 3, 4]
    assert " ".join(c["text"] for c in chunks) == routed["text"]


def test_the_examples_own_tests_pass_as_a_user_runs_them():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(QUICKSTART)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 passed" in done.stdout
