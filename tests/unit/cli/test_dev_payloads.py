"""`asya dev --payloads`: one line per final, payload or error, under its input's id, in input
order; `InputOrder` holds finals back until the inputs before them have ended."""

from __future__ import annotations

import json
import shlex
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from asya.cli import main
from asya.cli.finals import InputOrder, input_id_of
from asya.envelope import Branch, Envelope, Phase, Reason, Route, Status

ROOT = Path(__file__).resolve().parents[3]

APP = """
from asya import RetryPolicy, actor

ROUTE = ["split", "check"]


@actor
def split(doc):
    for part in doc["parts"]:
        yield {"part": part}


@actor(retry=RetryPolicy(max_attempts=1))
def check(doc):
    if doc["part"] == "bad":
        raise ValueError("a bad part")
    return {"ok": doc["part"]}
"""


@pytest.fixture
def app(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.path", list(sys.path))
    monkeypatch.setattr("sys.modules", dict(sys.modules))
    path = tmp_path / "payloads_app.py"
    path.write_text(textwrap.dedent(APP))
    return str(path)


def test_payloads_prints_one_line_per_final_in_input_order_under_the_inputs_id(
    capsys, tmp_path, app
):
    inputs = tmp_path / "in.jsonl"
    inputs.write_text(
        '{"route": ["split", "check"], "id": "first", "payload": {"parts": ["a", "b"]}}\n'
        "not json\n"
        '{"route": ["split", "check"], "id": "third", "payload": {"parts": ["c", "bad"]}}\n'
        '{"parts": ["d"]}\n'
    )
    output = tmp_path / "finals.jsonl"

    code = main(["dev", app, "--input", str(inputs), "--payloads", "--output", str(output)])

    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 1
    assert lines[:2] == [
        {"id": "first", "payload": {"ok": "a"}},
        {"id": "first", "payload": {"ok": "b"}},
    ]
    not_json = lines[2]
    assert not_json["error"]["reason"] == "MalformedEnvelope"
    assert lines[3:5] == [
        {"id": "third", "payload": {"ok": "c"}},
        {
            "id": "third",
            "error": {"reason": "HandlerError", "actor": "check", "message": "a bad part"},
        },
    ]
    last = lines[5]
    assert last["payload"] == {"ok": "d"}
    assert len(lines) == 6
    whole = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(whole) == 6
    assert {f["id"] for f in whole} >= {"first-1", "first-2", "third-1", "third-2"}
    assert f"{last['id']}-1" in {f["id"] for f in whole}


def test_the_documented_payloads_command_prints_a_payload_per_input_in_input_order(capsys):
    page = (ROOT / "docs" / "running-locally.md").read_text(encoding="utf-8")
    [command] = [
        line
        for line in page.splitlines()
        if line.startswith("asya dev examples/") and "--payloads" in line
    ]
    argv = shlex.split(command.split("#")[0])[1:]
    inputs = (ROOT / "examples" / "quickstart" / "inputs.jsonl").read_text().splitlines()

    code = main([*(str(ROOT / a) if a.startswith("examples/") else a for a in argv)])

    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    assert all(set(line) == {"id", "payload"} for line in lines)
    firsts = list(dict.fromkeys(line["id"] for line in lines))
    assert len(firsts) == len([line for line in inputs if line.strip()])


NOW = datetime(2025, 1, 1, tzinfo=UTC)


def final(envelope_id, *branches, ok=True):
    return Envelope(
        id=envelope_id,
        route=Route(curr="happy-end" if ok else "error-end"),
        lineage=tuple(Branch(index=i, of=n) for i, n in branches),
        status=Status(
            phase=Phase.SUCCEEDED if ok else Phase.FAILED,
            reason=None if ok else Reason.HANDLER_ERROR,
            created_at=NOW,
        ),
        payload=envelope_id,
    )


def ids(given):
    return [(input_id, f.id) for input_id, f in given]


def test_a_final_waits_for_every_input_before_it_to_end():
    order = InputOrder()
    for input_id in ("a", "b", "c"):
        order.fed(input_id)

    assert order.add(final("c")) == []
    assert order.add(final("b")) == []
    assert ids(order.add(final("a"))) == [("a", "a"), ("b", "b"), ("c", "c")]


def test_an_input_that_fans_out_goes_out_once_its_whole_tree_has_ended_in_tree_order():
    order = InputOrder()
    order.fed("a")
    order.fed("b")

    assert order.add(final("a-2", (2, 2))) == []
    assert order.add(final("b")) == []
    assert order.add(final("a-1-2", (1, 2), (2, 2))) == []
    assert order.add(final("a-1-1", (1, 2), (1, 2))) == [
        *[("a", f) for f in (final("a-1-1", (1, 2), (1, 2)), final("a-1-2", (1, 2), (2, 2)))],
        ("a", final("a-2", (2, 2))),
        ("b", final("b")),
    ]


def test_what_never_completed_still_goes_out_at_the_end_in_input_order():
    order = InputOrder()
    order.fed("a")
    order.fed("b")
    order.add(final("b"))
    order.add(final("a-1", (1, 2)))

    assert ids(order.rest()) == [("a", "a-1"), ("b", "b")]


def test_the_input_id_of_a_fan_out_child_keeps_dashes_of_the_inputs_own_id():
    assert input_id_of(final("order-17-2-1", (2, 3), (1, 1))) == "order-17"
    assert input_id_of(final("order-17")) == "order-17"
