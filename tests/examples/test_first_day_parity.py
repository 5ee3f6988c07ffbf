"""A new user's pipeline — a print, a numpy value returned by mistake, a batch actor that
routes per item, a GPU actor on a machine without one — ends the same way under `asya dev` on
a laptop and under `asya.testing.run` in pytest: each input's outcome (payload, or failure
reason), and nothing but finals on `asya dev`'s stdout."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import msgspec

from asya.testing import run
from tests.examples.commands import ROOT

APP = textwrap.dedent(
    """
    import numpy as np

    from asya import Context, actor

    ROUTE = ["clean", "embed", "classify"]


    @actor
    def clean(doc: dict) -> dict:
        print(f"cleaning {doc['n']}")  # a print: stderr, never among the finals
        return {**doc, "text": doc["text"].strip().lower()}


    @actor(batch=4, batch_wait_ms=5, gpus=1)  # no GPU here: it runs on CPU, said once
    class Embed:
        def __init__(self):
            self.weights = np.linspace(0.1, 1.0, 4)

        def __call__(self, docs: list[dict]) -> list[dict]:
            out = []
            for doc in docs:
                vector = np.array([len(w) for w in doc["text"].split()[:4]] + [0] * 4)[:4]
                score = float(vector @ self.weights) / 10
                if doc.get("forget_item"):
                    score = np.float32(score)  # the commonest ML mistake
                out.append({**doc, "score": round(score, 3)})
            return out


    @actor(batch=4, batch_wait_ms=5)
    def classify(docs: list[dict], ctxs: list[Context]) -> list[dict]:
        out = []
        for doc, ctx in zip(docs, ctxs):
            if doc["score"] < 0.5:
                ctx.route.next = ["review", *ctx.route.next]  # this item alone goes to review
            out.append({**doc, "label": "long" if doc["score"] >= 0.5 else "short"})
        return out


    @actor
    def review(doc: dict) -> dict:
        return {**doc, "reviewed": True}
    """
)

INPUTS = [
    {"n": 0, "text": "  A short one "},
    {"n": 1, "text": "a considerably longer sentence with several words"},
    {"n": 2, "text": "numpy slipped through here", "forget_item": True},
    {"n": 3, "text": "tiny"},
]


def outcome(final: dict) -> tuple:
    """What became of an input: its payload's label and review, or its failure reason."""
    if final["status"]["phase"] == "succeeded":
        payload = final["payload"]
        return ("succeeded", payload["label"], payload.get("reviewed", False))
    return ("failed", final["status"]["reason"])


def asya_dev(
    tmp_path, name: str, source: str, inputs: list[dict]
) -> tuple[str, subprocess.CompletedProcess]:
    """Write the app `source` as package `name` (one per test: `asya.testing.run` imports it)
    and run `asya dev` over `inputs`; the app's path and the finished process."""
    app = tmp_path / name
    app.mkdir()
    (app / "__init__.py").write_text(source)
    lines = tmp_path / "inputs.jsonl"
    lines.write_text("".join(json.dumps(i) + "\n" for i in inputs))
    done = subprocess.run(
        [sys.executable, "-m", "asya.cli", "dev", str(app), "--input", str(lines)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    return str(app), done


def test_asya_dev_and_pytest_end_each_input_the_same_way(tmp_path):
    app, done = asya_dev(tmp_path, "first_day", APP, INPUTS)
    finals = [json.loads(line) for line in done.stdout.splitlines()]  # JSON lines only
    results = run(app, INPUTS)

    by_dev = {f["payload"]["n"]: outcome(f) for f in finals}
    by_pytest = {f.payload["n"]: outcome(msgspec.to_builtins(f)) for f in results.finals}
    assert done.returncode == 1, done.stderr  # one input failed
    assert (
        by_dev
        == by_pytest
        == {
            0: ("succeeded", "short", True),
            1: ("succeeded", "long", False),
            2: ("failed", "InvalidOutput"),
            3: ("succeeded", "short", True),
        }
    )
    assert "cleaning 0" in done.stderr
    assert done.stderr.count("on CPU") == 1, done.stderr


FAN_OUT = textwrap.dedent(
    """
    from asya import actor

    ROUTE = ["split"]


    @actor(gpus=1)  # a worker process of its own under asya dev (on CPU here)
    def split(doc: dict):
        yield {"n": doc["n"], "part": "kept"}
        yield {"n": doc["n"], "part": "lost", "tags": {"a"}}  # a set: JSON makes it a list
    """
)


def ending(final: dict) -> tuple:
    """What became of one branch of a fan-out: its place, phase, reason, payload and error."""
    status = final["status"]
    error = (status.get("error") or {}).get("message")
    return (
        final["id"].rpartition("-")[2],
        status["phase"],
        status.get("reason"),
        final["payload"],
        error,
    )


def test_an_output_json_cannot_carry_fails_alone_in_a_worker_process_as_in_pytest(tmp_path):
    app, done = asya_dev(tmp_path, "fan_out", FAN_OUT, [{"n": 1}])
    by_dev = sorted(ending(json.loads(line)) for line in done.stdout.splitlines())
    by_pytest = sorted(ending(msgspec.to_builtins(f)) for f in run(app, [{"n": 1}]).finals)

    lost = (
        "output of 'split' cannot be sent: payload.tags is {'a'} (set): JSON has no sets (it"
        " would arrive as a list in arbitrary order); send sorted(...) or list(...)"
    )
    assert (
        by_dev
        == by_pytest
        == [
            ("1", "succeeded", None, {"n": 1, "part": "kept"}, None),
            ("2", "failed", "InvalidOutput", {"n": 1}, lost),
        ]
    ), done.stderr
