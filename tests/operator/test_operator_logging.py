"""The operator's log lines: kopf's format, with the fields asya's records carry."""

from __future__ import annotations

import json
import logging

import pytest
from asya_operator.cli import configure_logging

from asya.settings import ProcessSettings


@pytest.fixture
def restored_root():
    # kopf.configure changes the root logger and quiets asyncio's: both put back after.
    root, quieted = logging.getLogger(), logging.getLogger("asyncio")
    handlers, level = list(root.handlers), root.level
    asyncio_handlers, propagate = list(quieted.handlers), quieted.propagate
    yield root
    root.handlers[:] = handlers
    root.setLevel(level)
    quieted.handlers[:] = asyncio_handlers
    quieted.propagate = propagate


def _emit(root: logging.Logger, capsys) -> str:
    logging.getLogger("asya_operator.test").warning(
        "queues left on the broker", extra={"tries": 3, "error": "refused 100%"}
    )
    for handler in root.handlers:
        handler.flush()
    return capsys.readouterr().err


def test_a_text_line_ends_with_the_records_fields(restored_root, capsys):
    configure_logging(ProcessSettings(log_level="INFO", log_format="text"), verbose=False)

    line = _emit(restored_root, capsys).strip().splitlines()[-1]

    assert line.endswith('queues left on the broker tries=3 error="refused 100%"'), line


def test_a_json_line_holds_the_records_fields(restored_root, capsys):
    configure_logging(ProcessSettings(log_level="INFO", log_format="json"), verbose=False)

    record = json.loads(_emit(restored_root, capsys).strip().splitlines()[-1])

    assert record["message"] == "queues left on the broker"
    assert (record["tries"], record["error"]) == (3, "refused 100%")
