"""`asya dev | head -1`: the reader leaves, the run does not break, and every final is counted."""

from __future__ import annotations

import asyncio
import json
import os
import re

import pytest

from tests.integration.cli.processes import QUICKSTART, pipe_of, start_asya

BATCH_APP = """
from asya import actor

ROUTE = ["upper"]


@actor(batch=4, batch_wait_ms=5)
def upper(docs):
    return [doc.upper() for doc in docs]
"""


async def run_read_one_line_then_close(*args: str) -> tuple[int, bytes, str]:
    # A pipe of one page: asya's finals cannot all fit before the reader leaves.
    read_fd, write_fd = pipe_of(4096)
    process = await start_asya(*args, stdout=write_fd)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as reader:
        first = await asyncio.to_thread(reader.readline)
    _, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode, first, err.decode()


@pytest.mark.parametrize("mode", ["memory", "broker"])
async def test_a_reader_that_leaves_after_one_line_ends_nothing_and_the_counts_stay_exact(
    mode, mode_args
):
    code, first, err = await run_read_one_line_then_close(
        "dev", str(QUICKSTART), "--input", str(QUICKSTART / "inputs.jsonl"), *mode_args
    )

    assert code == 0, err
    assert json.loads(first)["status"]["phase"] == "succeeded"
    assert "asya: stdout was closed after" in err
    assert "final envelopes: 58 (58 succeeded, 0 failed)" in err
    assert re.search(r"^normalize +52 +52 +0 +0 ", err, re.MULTILINE), err
    assert "Traceback" not in err
    assert "BrokenPipeError" not in err


async def test_a_one_actor_batch_app_whose_reader_leaves_still_finishes(tmp_path):
    (tmp_path / "batch_app.py").write_text(BATCH_APP)
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(f'"item {n}"\n' for n in range(100)))

    code, first, err = await run_read_one_line_then_close(
        "dev", str(tmp_path / "batch_app.py"), "--input", str(inputs)
    )

    assert code == 0, err
    assert json.loads(first)["payload"].startswith("ITEM ")
    assert "final envelopes: 100 (100 succeeded, 0 failed)" in err
    assert re.search(r"^upper +100 +100 +0 +0 ", err, re.MULTILINE), err
    assert "Traceback" not in err
