"""`asya migrate-queues`: what it needs before it touches a broker."""

from __future__ import annotations

import pytest

from asya.cli import main

NOWHERE = "amqp://guest:guest@127.0.0.1:1/"


def test_without_app_or_actors_it_says_which_queues_it_needs(capsys):
    code = main(["migrate-queues", "--namespace", "ml", "--broker", NOWHERE])

    assert code == 2
    assert capsys.readouterr().err == (
        "asya: pass APP, or --actors a,b: the actors whose queues to move\n"
    )


def test_without_a_broker_it_asks_for_one(capsys, monkeypatch):
    monkeypatch.delenv("ASYA_BROKER_URL", raising=False)

    code = main(["migrate-queues", "--actors", "a", "--namespace", "ml"])

    assert code == 2
    assert capsys.readouterr().err == "asya: pass --broker URL (or set ASYA_BROKER_URL)\n"


def test_it_has_no_default_namespace(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["migrate-queues", "--actors", "a", "--broker", NOWHERE])

    assert caught.value.code == 2
    assert "the following arguments are required: --namespace" in capsys.readouterr().err
