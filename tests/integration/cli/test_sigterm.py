"""SIGTERM (`kill`, Kubernetes) stops `asya dev` as Ctrl-C does: nothing left behind, exit 143."""

from __future__ import annotations

import asyncio
import signal

import pytest

from tests.integration.cli.processes import (
    group_pids,
    namespace_of,
    queues_left,
    read_stderr_until,
    start_asya,
    wait_until_gone,
)

SLOW_APP = """
import sys
import time

from asya import actor

ROUTE = ["crawl"]


@actor(timeout_s=120)
def crawl(doc):
    print("crawl: working", file=sys.stderr, flush=True)
    time.sleep(60)
    return doc
"""


@pytest.mark.parametrize("mode", ["memory", "broker", "isolate"])
async def test_sigterm_mid_run_stops_every_process_deletes_the_queues_and_exits_143(
    tmp_path, mode, mode_args
):
    (tmp_path / "slow_app.py").write_text(SLOW_APP)
    (tmp_path / "in.jsonl").write_text('{"page": 1}\n')
    process = await start_asya(
        "dev", str(tmp_path / "slow_app.py"), "--input", str(tmp_path / "in.jsonl"), *mode_args
    )
    err = await read_stderr_until(process, "crawl: working")
    started = group_pids(process.pid)

    process.send_signal(signal.SIGTERM)  # to asya alone, as `kill PID` or the kubelet does
    _, rest = await asyncio.wait_for(process.communicate(), 60)
    err += rest.decode()

    assert process.returncode == 143, err
    assert err.endswith("asya: terminated\n")
    assert "Traceback" not in err
    assert (
        len(started) == {"memory": 1, "broker": 1, "isolate": 4}[mode]
    )  # + runtime, worker, sidecar
    assert await wait_until_gone(started) == set()
    if mode_args:
        assert await queues_left(mode_args[1], namespace_of(err), ["crawl"]) == []
