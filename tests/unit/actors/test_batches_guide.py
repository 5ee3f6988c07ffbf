"""docs/batches-and-typed-payloads.md promises what the code does: its example app is run by
its own test, as written on the page, and the messages it quotes are the ones asya writes."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from asya import actor
from asya.actor import spec_of
from asya.handler import LocalInvoker
from asya.testing import run
from tests.factories import envelope

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "batches-and-typed-payloads.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", GUIDE.read_text(), re.DOTALL | re.MULTILINE)


def test_the_guides_example_app_passes_the_guides_own_test(tmp_path, monkeypatch):
    app, test = blocks("python")
    (tmp_path / "classify_app.py").write_text(app)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(test, str(GUIDE), "exec"), namespace)

    namespace["test_unsure_reviews_go_to_a_person_and_bad_ones_fail_alone"]()

    [misfit] = run("classify_app.py", [{"txt": "a typo"}]).failed
    assert misfit.status.error.message in blocks("text")[0].splitlines()


class Item(msgspec.Struct):
    score: float


class Batch(msgspec.Struct):
    items: list[Item]


async def test_the_failure_messages_the_guide_quotes_are_the_ones_asya_writes():
    @actor(name="score")
    def score(batch: Batch) -> Batch:
        return batch

    invoker = LocalInvoker(spec_of(score))
    payload = {"items": [{"score": 1}, {"score": 2}, {"score": "high"}]}
    try:
        [outcome] = await invoker.invoke([envelope("score", payload=payload)])
    finally:
        await invoker.aclose()

    assert outcome.message in blocks("text")[0].splitlines()
