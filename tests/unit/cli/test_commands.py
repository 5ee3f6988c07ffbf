"""The `asya` command: help that helps, clear errors, honest exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from asya.cli import main

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart"


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["--help"])

    out = capsys.readouterr().out
    assert caught.value.code == 0
    assert "dev" in out
    assert "send" in out


def test_dev_help_documents_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["dev", "--help"])

    out = capsys.readouterr().out
    for option in (
        "--input",
        "--route",
        "--output",
        "--payloads",
        "--allow-failures",
        "--quiet",
        "--strict-gpus",
        "--max-payload-bytes",
        "--hop-limit",
        "--poll-ms",
    ):
        assert option in out


def test_a_missing_input_file_is_a_usage_error(capsys, tmp_path):
    code = main(["dev", str(QUICKSTART), "--input", str(tmp_path / "absent.jsonl")])

    assert code == 2
    assert "cannot read --input" in capsys.readouterr().err


def test_an_app_without_actors_is_a_usage_error(capsys, tmp_path):
    (tmp_path / "empty_app.py").write_text("x = 1\n")
    (tmp_path / "in.jsonl").write_text("{}\n")

    code = main(["dev", str(tmp_path / "empty_app.py"), "--input", str(tmp_path / "in.jsonl")])

    assert code == 2
    assert "no @actor found" in capsys.readouterr().err


def test_a_bad_setting_fails_at_start_naming_the_variable(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("ASYA_HOP_LIMIT", "lots")

    code = main(["dev", str(QUICKSTART), "--input", str(tmp_path / "x.jsonl")])

    assert code == 2
    assert "ASYA_HOP_LIMIT='lots' is invalid" in capsys.readouterr().err


def test_dev_honours_an_explicit_route_and_writes_the_output_file(capsys, tmp_path):
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('{"text": "Great and lovely."}\n\n')
    output = tmp_path / "out.jsonl"

    code = main(
        [
            "dev",
            str(QUICKSTART),
            "--input",
            str(inputs),
            "--route",
            "normalize",
            "--output",
            str(output),
            "--quiet",
        ]
    )

    [final] = [json.loads(line) for line in output.read_text().splitlines()]
    assert code == 0
    assert final["route"]["prev"] == ["normalize"]
    assert capsys.readouterr().out.count("\n") == 1


def test_send_prints_the_final_envelope(capsys):
    code = main(
        [
            "send",
            "--app",
            str(QUICKSTART),
            "--payload",
            '{"text": "Excellent, I love it."}',
            "--header",
            "team=a",
        ]
    )

    final = json.loads(capsys.readouterr().out)
    assert code == 0
    assert final["payload"]["sentiment"] == "positive"
    assert final["headers"]["team"] == "a"
    assert final["route"]["prev"] == ["normalize", "detect-language", "score"]


def test_send_of_a_failing_payload_exits_1_with_the_error_end_envelope(capsys):
    code = main(["send", "--app", str(QUICKSTART), "--payload", '{"text": 5}'])

    final = json.loads(capsys.readouterr().out)
    assert code == 1
    assert final["status"]["reason"] == "HandlerError"


def test_send_to_an_unknown_first_actor_fails_loudly(capsys):
    code = main(["send", "--app", str(QUICKSTART), "--route", "translate", "--payload", "{}"])

    assert code == 2
    assert "--route names 'translate', which the app does not define; the actors are:" in (
        capsys.readouterr().err
    )


def test_send_with_a_payload_that_is_not_json_is_a_usage_error(capsys):
    code = main(["send", "--app", str(QUICKSTART), "--payload", "{nope"])

    assert code == 2
    assert "--payload is not valid JSON" in capsys.readouterr().err


def test_the_in_memory_commands_need_no_broker_client(tmp_path):
    # As after a plain `pip install -e .`: aio-pika is not there.
    script = (
        "import sys; sys.modules['aio_pika'] = None; sys.modules['aiormq'] = None\n"
        "from asya.cli import main\n"
        f"sys.exit(main(['dev', {str(QUICKSTART)!r}, '--input', "
        f"{str(QUICKSTART / 'inputs.jsonl')!r}, '--quiet']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    broker = subprocess.run(
        [sys.executable, "-c", script.replace("'--quiet'", "'--quiet', '--broker', 'amqp://x'")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 58
    assert broker.returncode == 2
    assert "pip install 'asya[rabbitmq]'" in broker.stderr
