"""`asya dev` on a machine with too few GPUs: a GPU actor runs on CPU, said once; only the
actors the inputs reach are started; `--strict-gpus` refuses as `asya serve` does.

Each GPU actor asks for 64 GPUs per worker, more than any machine running these tests has.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from asya.cli import main

APP = """
import os

from asya import Context, actor

ROUTE = ["clean", "embed"]


@actor
def clean(doc):
    return doc


@actor(gpus=64)
def embed(doc):
    return {"visible": os.environ.get("CUDA_VISIBLE_DEVICES")}


@actor(gpus=64)
def rerank(doc):
    return doc


@actor
def judge(doc, ctx: Context):
    return doc
"""


@pytest.fixture
def app(tmp_path, monkeypatch):
    """The app and an input file; what the app imports is forgotten after the test."""
    monkeypatch.setattr("sys.path", list(sys.path))
    monkeypatch.setattr("sys.modules", dict(sys.modules))
    (tmp_path / "gpu_laptop_app.py").write_text(textwrap.dedent(APP))
    (tmp_path / "in.jsonl").write_text('{"n": 1}\n{"n": 2}\n')
    return [str(tmp_path / "gpu_laptop_app.py"), "--input", str(tmp_path / "in.jsonl")]


def test_a_gpu_actor_runs_on_cpu_with_every_gpu_hidden_and_one_line_says_so(capsys, app):
    code = main(["dev", *app])

    captured = capsys.readouterr()
    finals = [json.loads(line) for line in captured.out.splitlines()]
    notices = [line for line in captured.err.splitlines() if "run on CPU" in line]
    assert code == 0, captured.err
    assert [f["payload"] for f in finals] == [{"visible": ""}, {"visible": ""}]
    assert len(notices) == 1
    assert notices[0].startswith("asya: GPU actor(s) 'embed' (gpus=64) run on CPU")
    assert "--strict-gpus" in notices[0]
    assert "rerank" not in captured.err  # on no route: not started


def test_quiet_keeps_the_cpu_notice_off_stderr_too(capsys, app):
    code = main(["dev", *app, "--quiet"])

    captured = capsys.readouterr()
    assert code == 0
    assert captured.err == ""


def test_strict_gpus_stops_the_run_at_start_naming_the_actor_and_the_fix(capsys, app):
    code = main(["dev", *app, "--strict-gpus"])

    captured = capsys.readouterr()
    assert code == 2
    assert "actor 'embed' needs 64 GPU(s) per worker" in captured.err
    assert "cpu_fallback=True" in captured.err
    assert captured.out == ""


def test_strict_gpus_runs_a_route_that_reaches_no_gpu_actor(capsys, app):
    code = main(["dev", *app, "--strict-gpus", "--route", "clean"])

    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert [json.loads(line)["payload"] for line in captured.out.splitlines()] == [
        {"n": 1},
        {"n": 2},
    ]


def test_an_actor_that_may_rewrite_its_route_reaches_every_actor(capsys, app):
    code = main(["dev", *app, "--strict-gpus", "--route", "judge"])

    captured = capsys.readouterr()
    assert code == 2
    assert "needs 64 GPU(s) per worker" in captured.err
