"""Logs are one line per record, text or JSON, with their structured fields shown."""

from __future__ import annotations

import json
import logging

import pytest

from asya.logs import OneLineFormatter, configure
from asya.settings import ProcessSettings


@pytest.fixture(autouse=True)
def restored_root_logger():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def raise_and_log(logger: str, message: str) -> None:
    try:
        raise ConnectionError("connection refused")
    except ConnectionError:
        logging.getLogger(logger).exception(message)


def test_a_text_line_is_level_logger_message_and_the_extra_fields(capsys):
    configure(ProcessSettings(log_format="text"))

    logging.getLogger("asya.sidecar").warning(
        "broker unreachable", extra={"broker": "amqp://mq:5672/", "attempt": 3, "note": "a b"}
    )

    assert capsys.readouterr().err == (
        'WARNING asya.sidecar: broker unreachable broker=amqp://mq:5672/ attempt=3 note="a b"\n'
    )


def test_a_json_line_has_time_level_logger_message_and_the_extra_fields(capsys):
    configure(ProcessSettings(log_format="json"))

    logging.getLogger("asya.consumer").error("handler failed", extra={"envelope_id": "e1"})

    line = json.loads(capsys.readouterr().err)
    assert set(line) == {"time", "level", "logger", "message", "envelope_id"}
    assert (line["level"], line["logger"], line["message"], line["envelope_id"]) == (
        "ERROR",
        "asya.consumer",
        "handler failed",
        "e1",
    )


def test_the_json_time_is_utc_iso_8601_to_the_millisecond():
    record = logging.makeLogRecord({"name": "asya", "msg": "m", "created": 1767268800.25})

    line = OneLineFormatter(as_json=True, quiet_tracebacks=True).format(record)

    assert json.loads(line)["time"] == "2026-01-01T12:00:00.250+00:00"


@pytest.mark.parametrize("logger", ["aiormq.connection", "aio_pika.robust_connection", "asyncio"])
def test_the_broker_client_and_asyncio_are_held_to_one_line_without_a_traceback(capsys, logger):
    configure(ProcessSettings(log_level="WARNING"))

    raise_and_log(logger, "Unexpected connection close")

    assert capsys.readouterr().err == (
        f'ERROR {logger}: Unexpected connection close error="ConnectionError: connection refused"\n'
    )


def test_at_debug_the_broker_clients_traceback_is_shown(capsys):
    configure(ProcessSettings(log_level="DEBUG"))

    raise_and_log("aiormq.connection", "Unexpected connection close")

    err = capsys.readouterr().err
    assert err.startswith("ERROR aiormq.connection: Unexpected connection close\nTraceback")
    assert err.endswith("ConnectionError: connection refused\n")


def test_asyas_own_exception_logs_keep_their_traceback(capsys):
    configure(ProcessSettings(log_level="WARNING"))

    raise_and_log("asya.local", "worker failed")

    assert "\nTraceback (most recent call last):\n" in capsys.readouterr().err


def test_records_below_the_level_are_not_written(capsys):
    configure(ProcessSettings(log_level="WARNING"))

    logging.getLogger("asya.sidecar").info("consuming")

    assert capsys.readouterr().err == ""


def test_a_multi_line_message_stays_on_one_text_line(capsys):
    configure(ProcessSettings())

    logging.getLogger("asyncio").error("Task exception was never retrieved\nfuture: <Task>")

    assert capsys.readouterr().err == (
        "ERROR asyncio: Task exception was never retrieved\\nfuture: <Task>\n"
    )


def test_configuring_again_replaces_the_earlier_setup_instead_of_doubling_lines(capsys):
    configure(ProcessSettings(log_format="json"))
    configure(ProcessSettings(log_format="text"))

    logging.getLogger("asya").warning("once")

    assert capsys.readouterr().err == "WARNING asya: once\n"
