"""`asya send` checks a route as `asya dev` does, and says what its --timeout sets: the wait
and the envelope's deadline, long enough by default for a cold GPU actor."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from asya.cli import main

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart"


def send(*args):
    return main(["send", "--app", str(QUICKSTART), "--payload", '{"text": "Fine."}', *args])


def test_send_with_a_misspelt_actor_guesses_the_closest_as_dev_does(capsys):
    code = send("--route", "normalise,detect-language,score")

    assert code == 2
    assert capsys.readouterr().err == (
        "asya: --route names 'normalise', which the app does not define; did you mean"
        " 'normalize'?\n"
    )


def test_send_with_the_python_name_of_an_actor_answers_with_its_kebab_case_name(capsys):
    code = send("--route", "normalize,detect_language,score")

    assert code == 2
    assert "did you mean 'detect-language'?" in capsys.readouterr().err


def _deadline_s(final) -> float:
    status = final["status"]
    created = datetime.fromisoformat(status["created_at"])
    return (datetime.fromisoformat(status["deadline_at"]) - created).total_seconds()


def test_the_envelope_sent_gets_a_deadline_of_600_s_by_default(capsys):
    code = send()

    final = json.loads(capsys.readouterr().out)
    assert code == 0
    assert _deadline_s(final) == 600.0


def test_timeout_sets_the_envelope_deadline_too(capsys):
    code = send("--timeout", "20")

    final = json.loads(capsys.readouterr().out)
    assert code == 0
    assert _deadline_s(final) == 20.0


def test_timeout_without_wait_on_a_broker_is_refused_saying_what_it_is_for(capsys):
    broker = ["--broker", "amqp://nobody@127.0.0.1:1/"]
    code = main(["send", *broker, "--route", "a", "--payload", "{}", "--timeout", "20"])

    assert code == 2
    assert "--timeout is how long --wait waits (and the envelope's deadline): add --wait" in (
        capsys.readouterr().err
    )


def test_send_help_says_timeout_is_also_the_deadline_and_why_its_default(capsys):
    with pytest.raises(SystemExit):
        main(["send", "--help"])

    text = " ".join(capsys.readouterr().out.split())
    assert "and also the envelope's deadline" in text
    assert "DeadlineExceeded (600, so that the first call to a scaled-to-zero GPU actor" in text
