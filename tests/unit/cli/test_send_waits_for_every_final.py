"""`asya send` waits for every envelope a fan-out makes, prints them all, and fails on any."""

from __future__ import annotations

import json
from pathlib import Path

from asya.cli import main

TREE_APP = Path(__file__).parents[1] / "client" / "tree_app.py"


def send(payload, *extra):
    return main(["send", "--app", str(TREE_APP), "--payload", json.dumps(payload), *extra])


def test_send_prints_every_final_of_a_fan_out_as_json_lines(capsys):
    code = send([1, [2, 3], []])

    finals = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    assert [f["payload"] for f in finals] == [1, 2, 3, []]


def test_send_exits_1_when_one_child_of_a_fan_out_failed_and_prints_them_all(capsys):
    code = send([1, "bad", 2])

    finals = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 1
    assert [(f["payload"], f["status"]["reason"]) for f in finals] == [
        (1, None),
        ("bad", "HandlerError"),
        (2, None),
    ]


def test_send_of_a_fan_out_to_zero_children_prints_the_one_final(capsys):
    code = send([])

    finals = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    assert [f["payload"] for f in finals] == [[]]


def test_send_that_times_out_prints_the_finals_that_came_and_exits_1(capsys):
    code = send([1, "slow"], "--timeout", "2")

    captured = capsys.readouterr()
    finals = [json.loads(line) for line in captured.out.splitlines()]
    assert code == 1
    assert [f["payload"] for f in finals] == [1]
    assert "accounting for 50% of its fan-out tree" in captured.err
