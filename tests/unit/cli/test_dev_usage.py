"""`asya dev` refuses what cannot work before starting anything: exit 2, one line saying why."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from asya.cli import main

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart"
INPUTS = str(QUICKSTART / "inputs.jsonl")


@pytest.fixture
def app_dir(tmp_path, monkeypatch):
    """A folder for apps written by the test; what they import is forgotten after it."""
    monkeypatch.setattr("sys.path", list(sys.path))
    monkeypatch.setattr("sys.modules", dict(sys.modules))
    return tmp_path


def write_app(folder, name, source):
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    return str(path)


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        pytest.param("--hop-limit", "0", "must be 1 or more, got 0", id="hop-limit-zero"),
        pytest.param(
            "--max-payload-bytes", "0", "must be 1 or more, got 0", id="max-payload-bytes-zero"
        ),
        pytest.param("--hop-limit", "-3", "must be 1 or more, got -3", id="hop-limit-negative"),
        pytest.param("--poll-ms", "0", "must be 1 or more, got 0", id="poll-ms-zero"),
        pytest.param("--hop-limit", "many", "expected a whole number", id="not-a-number"),
    ],
)
def test_a_limit_that_is_not_positive_is_a_usage_error(capsys, option, value, expected):
    with pytest.raises(SystemExit) as caught:
        main(["dev", str(QUICKSTART), "--input", INPUTS, option, value])

    assert caught.value.code == 2
    assert f"argument {option}: {expected}" in capsys.readouterr().err


def test_a_hop_limit_of_one_is_honoured_not_replaced_by_the_default(capsys, tmp_path):
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('{"text": "Great and lovely."}\n')

    code = main(["dev", str(QUICKSTART), "--input", str(inputs), "--hop-limit", "1", "--quiet"])

    [final] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 1
    assert final["status"]["reason"] == "HopLimitExceeded"


def test_a_route_naming_an_actor_the_app_lacks_fails_fast_naming_the_closest(capsys):
    code = main(["dev", str(QUICKSTART), "--input", INPUTS, "--route", "normalize,scroe"])

    captured = capsys.readouterr()
    assert code == 2
    assert captured.err == (
        "asya: --route names 'scroe', which the app does not define; did you mean 'score'?\n"
    )
    assert captured.out == ""


def test_bare_payloads_with_no_route_anywhere_fail_fast_saying_how_to_give_one(capsys, app_dir):
    app = write_app(app_dir, "unrouted_app", "from asya import actor\n@actor\ndef a(d): return d\n")
    inputs = app_dir / "in.jsonl"
    inputs.write_text('{"route": ["a"], "payload": 1}\n{"text": "bare"}\n')

    code = main(["dev", app, "--input", str(inputs)])

    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.startswith(
        "asya: input line 2 is a bare payload and there is no route for it: pass --route a,b,c,"
        " declare ROUTE = [...] in the app"
    )
    assert captured.out == ""


def test_lines_that_are_whole_envelopes_need_no_route(capsys, app_dir):
    app = write_app(app_dir, "unrouted_app", "from asya import actor\n@actor\ndef a(d): return d\n")
    inputs = app_dir / "in.jsonl"
    inputs.write_text('{"route": ["a"], "payload": 1}\n')

    code = main(["dev", app, "--input", str(inputs), "--quiet"])

    [final] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    assert final["route"]["prev"] == ["a"]


@pytest.mark.parametrize(
    ("source", "line", "error"),
    [
        pytest.param("def f(:\n    pass\n", 1, "SyntaxError: ", id="syntax-error"),
        pytest.param("raise KeyError('MODEL_PATH')\n", 1, "KeyError: 'MODEL_PATH'", id="module"),
        pytest.param(
            "from asya import RetryPolicy, actor\n"
            "@actor(retry=RetryPolicy(max_attempt=3))\n"
            "def a(d): return d\n",
            2,
            "'max_attempt'",
            id="misspelt-retry-keyword",
        ),
    ],
)
def test_an_app_that_raises_on_import_exits_2_with_one_line_naming_file_and_line(
    capsys, app_dir, source, line, error
):
    app = write_app(app_dir, "raising_app", source)

    code = main(["dev", app, "--input", INPUTS])

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"asya: cannot import 'raising_app': {app}, line {line}: ")
    assert error in err
    assert err.count("\n") == 1


def test_a_line_that_is_not_utf8_ends_in_error_end_and_the_others_still_run(capsys, tmp_path):
    inputs = tmp_path / "in.jsonl"
    inputs.write_bytes(b'{"text": "Great and lovely."}\n{"text": "caf\xe9"}\n')

    code = main(["dev", str(QUICKSTART), "--input", str(inputs), "--quiet"])

    finals = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    reasons = sorted(str(f["status"]["reason"]) for f in finals)
    assert code == 1
    assert reasons == ["MalformedEnvelope", "None"]
