"""How an asya process writes its logs: one record per line, as text or JSON, on stderr.

`configure(settings.process)` is called once by each entry point (the `asya` CLI, `asya-sidecar`,
`python -m asya.runtime`); nothing else touches the root logger. asya logs a fixed message with
its ids as `extra=` fields, and both formats show them:

    text  WARNING asya.sidecar: broker unreachable broker=amqp://guest:***@mq:5672/ attempt=3
    json  {"time": "...", "level": "WARNING", "logger": "asya.sidecar", "message": "...", ...}

The broker client and asyncio log tracebacks for failures asya already reports in a line of its
own (a lost connection, a failed reconnect). Below DEBUG their records are held to one line:
the exception becomes an `error` field, its traceback is dropped.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Final

from asya.settings import ProcessSettings

QUIET_LOGGERS: Final = ("aiormq", "aio_pika", "asyncio")
"""Loggers (and their children) whose tracebacks only DEBUG shows."""

_RECORD_ATTRIBUTES: Final = frozenset(vars(logging.makeLogRecord({}))) | {
    "message",
    "asctime",
    "taskName",
}
"""What every LogRecord has; any other attribute came from `extra=`."""


class OneLineFormatter(logging.Formatter):
    """`LEVEL logger: message key=value ...`, or the same as one JSON object."""

    def __init__(self, *, as_json: bool, quiet_tracebacks: bool) -> None:
        super().__init__()
        self._as_json = as_json
        self._quiet_tracebacks = quiet_tracebacks

    def format(self, record: logging.LogRecord) -> str:
        fields = extra_fields(record)
        traceback = None
        if record.exc_info and record.exc_info[1] is not None:
            if self._quiet_tracebacks and _is_quiet(record.name):
                error = record.exc_info[1]
                fields["error"] = f"{type(error).__name__}: {error}"
            else:
                traceback = self.formatException(record.exc_info)
        if self._as_json:
            return _as_json(record, fields, traceback)
        message = record.getMessage().replace("\n", "\\n")
        pairs = logfmt_pairs(fields)
        line = f"{record.levelname} {record.name}: {message}{pairs}"
        return line if traceback is None else f"{line}\n{traceback}"


class _StderrHandler(logging.Handler):
    # Writes to whatever sys.stderr is at the time (as logging.lastResort does), so a process
    # whose stderr is replaced later (pytest's capture, say) never writes to a closed stream.
    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(f"{self.format(record)}\n")
            sys.stderr.flush()
        except Exception:  # logging's contract: report through handleError, never raise
            self.handleError(record)


def configure(process: ProcessSettings) -> None:
    """Send every log record at `process.log_level` or above to stderr, one per line.

    Calling it again replaces what an earlier call set up; other handlers are left alone.
    """
    level = logging.getLevelNamesMapping()[process.log_level]
    handler = _StderrHandler()
    handler.setFormatter(
        OneLineFormatter(
            as_json=process.log_format == "json", quiet_tracebacks=level > logging.DEBUG
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def _is_quiet(logger: str) -> bool:
    return any(logger == name or logger.startswith(f"{name}.") for name in QUIET_LOGGERS)


def _as_json(record: logging.LogRecord, fields: dict[str, Any], traceback: str | None) -> str:
    document: dict[str, Any] = {
        "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
        "level": record.levelname,
        "logger": record.name,
        "message": record.getMessage(),
    }
    for key, value in fields.items():
        document.setdefault(key, value)
    if traceback is not None:
        document["traceback"] = traceback
    return json.dumps(document, default=str)


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a record was given as `extra=` (whatever every LogRecord has left out)."""
    return {k: v for k, v in vars(record).items() if k not in _RECORD_ATTRIBUTES}


def logfmt_pairs(fields: dict[str, Any]) -> str:
    """` key=value ...` as the text format shows fields (empty for none)."""
    return "".join(f" {key}={_logfmt(value)}" for key, value in fields.items())


def _logfmt(value: Any) -> str:
    # Bare when it reads unambiguously, else quoted as a JSON string.
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text and not any(c in text for c in ' "=\n\t'):
        return text
    return json.dumps(text)
