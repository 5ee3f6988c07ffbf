"""The `asya` command sets up logging from ASYA_LOG_* or --log-level, checked like any setting."""

from __future__ import annotations

import logging

import pytest

from asya.cli import main


@pytest.fixture(autouse=True)
def restored_root_logger():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_an_unknown_log_level_flag_is_a_usage_error_listing_the_levels(capsys):
    code = main(["--log-level", "loud", "admission", "simulate", "missing.yaml"])

    assert code == 2
    assert capsys.readouterr().err == (
        "asya: ASYA_LOG_LEVEL='LOUD' is invalid: Invalid enum value 'LOUD' (expected one of:"
        " DEBUG, INFO, WARNING, ERROR, CRITICAL)\n"
    )


def test_the_log_level_flag_is_read_in_any_case_and_wins_over_the_variable(monkeypatch):
    monkeypatch.setenv("ASYA_LOG_LEVEL", "ERROR")

    main(["--log-level", "debug", "admission", "simulate", "missing.yaml"])

    assert logging.getLogger().level == logging.DEBUG
