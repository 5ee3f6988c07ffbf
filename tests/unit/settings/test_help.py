"""`asya-sidecar --help` and `python -m asya.runtime --help` list the variables they read."""

from __future__ import annotations

import pytest
from asya_sidecar.main import main as sidecar_main

from asya.runtime.__main__ import main as runtime_main


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_the_sidecars_help_lists_its_variables_with_their_defaults(capsys, flag):
    with pytest.raises(SystemExit) as exited:
        sidecar_main([flag])

    out = capsys.readouterr().out
    assert exited.value.code == 0
    assert out.startswith("usage: asya-sidecar [-h]\n")
    assert "  ASYA_BROKER_URL (unset)\n      AMQP URL of the broker" in out
    assert "  ASYA_ACTOR (unset)\n      the actor whose queue the sidecar owns" in out
    assert "  ASYA_RUNTIME_WAIT_S=30\n" in out
    assert "  ASYA_LOG_FORMAT=text\n" in out


def test_the_sidecars_help_leaves_out_what_only_the_runtime_reads(capsys):
    with pytest.raises(SystemExit):
        sidecar_main(["--help"])

    out = capsys.readouterr().out
    assert "  ASYA_SOCKET_PATH=/var/run/asya/asya-runtime.sock\n" in out
    assert "ASYA_HANDLER" not in out
    assert "ASYA_WORKERS" not in out


def test_the_sidecar_with_any_other_argument_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        sidecar_main(["--actor", "x"])

    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "usage: asya-sidecar [-h]\nasya-sidecar: error: unrecognized arguments: --actor x\n"
    )


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_the_runtimes_help_lists_its_variables_with_their_defaults(capsys, flag):
    with pytest.raises(SystemExit) as exited:
        runtime_main([flag])

    out = capsys.readouterr().out
    assert exited.value.code == 0
    assert out.startswith("usage: python -m asya.runtime [-h]\n")
    assert "  ASYA_HANDLER (unset)\n      handler reference module:attr the runtime serves" in out
    assert "  ASYA_WORKERS=0\n" in out
    assert "ASYA_BROKER_URL" not in out


def test_the_runtime_with_any_other_argument_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        runtime_main(["serve"])

    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "usage: python -m asya.runtime [-h]\n"
        "python -m asya.runtime: error: unrecognized arguments: serve\n"
    )
