"""`asya serve` refuses what cannot work before reaching the broker: exit 2, one line saying why."""

from __future__ import annotations

import sys
import textwrap

import pytest

from asya.cli import main

APP = """
from asya import actor

@actor
def split(doc):
    return doc

@actor
def shout(doc):
    return doc
"""


@pytest.fixture
def app(tmp_path, monkeypatch):
    """An app written by the test; what it imports is forgotten after it."""
    monkeypatch.setattr("sys.path", list(sys.path))
    monkeypatch.setattr("sys.modules", dict(sys.modules))
    path = tmp_path / "serve_app.py"
    path.write_text(textwrap.dedent(APP))
    return str(path)


def test_an_unknown_name_in_actors_exits_2_naming_the_closest(app, capsys):
    code = main(["serve", app, "--broker", "amqp://127.0.0.1:1/", "--actors", "split,shuot"])

    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        "asya: --actors names 'shuot', which the app does not define; did you mean 'shout'?\n"
    )


def test_serve_without_a_broker_exits_2_saying_how_to_name_one(app, capsys):
    code = main(["serve", app])

    assert code == 2
    assert capsys.readouterr().err == "asya: pass --broker URL (or set ASYA_BROKER_URL)\n"


@pytest.mark.parametrize("value", ["-1", "x"], ids=["negative", "not-a-number"])
def test_a_bad_status_interval_is_a_usage_error(app, value, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["serve", app, "--broker", "amqp://127.0.0.1:1/", "--status-every", value])

    assert exited.value.code == 2
    assert "--status-every" in capsys.readouterr().err
