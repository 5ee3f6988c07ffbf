"""`asya dev --isolate`: pods of runtime + sidecar processes, scaled, separated, stopped."""

from __future__ import annotations

import asyncio
import json
import re

from tests.integration.cli.processes import group_pids, namespace_of, queues_left, start_asya

SCALING_APP = """
import time

from asya import actor

ROUTE = ["work"]


@actor(max_replicas=3, queue_length=1)
def work(doc):
    time.sleep(0.1)
    return doc
"""

ENV_APP = """
import os

from asya import actor

ROUTE = ["peek"]


@actor
def peek(doc):
    # The handler runs in a worker process of the runtime: look at both environments.
    runtime = open(f"/proc/{os.getppid()}/environ", "rb").read().split(b"\\0")
    names = [*os.environ, *(entry.partition(b"=")[0].decode() for entry in runtime)]
    return sorted({name for name in names if name.startswith("ASYA_BROKER_")})
"""

BROKEN_APP = """
from asya import actor

ROUTE = ["load"]


@actor
class Load:
    def __init__(self):
        raise OSError("weights not found")

    def __call__(self, doc):
        return doc
"""


async def dev_isolated(app_source, inputs, tmp_path, amqp_url, env=None, timeout_s=180):
    (tmp_path / "isolated_app.py").write_text(app_source)
    (tmp_path / "in.jsonl").write_text("".join(line + "\n" for line in inputs))
    process = await start_asya(
        "dev",
        str(tmp_path / "isolated_app.py"),
        "--input",
        str(tmp_path / "in.jsonl"),
        "--broker",
        amqp_url,
        "--isolate",
        env=env,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout_s)
    finals = [json.loads(line) for line in out.decode().splitlines()]
    return process, finals, err.decode()


async def test_an_isolated_actor_scales_past_one_pod_on_a_deep_queue_and_counts_exactly(
    tmp_path, amqp_url
):
    inputs = [json.dumps({"n": n}) for n in range(30)]

    process, finals, err = await dev_isolated(SCALING_APP, inputs, tmp_path, amqp_url)

    [row] = re.findall(r"^work\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+(\d+)$", err, re.M)
    envelopes, attempts, retried, failed, peak = map(int, row)
    assert process.returncode == 0, err
    assert sorted(f["payload"]["n"] for f in finals) == list(range(30))
    assert (envelopes, attempts, retried, failed) == (30, 30, 0, 0)
    assert 1 < peak <= 3
    assert err.count("asya-sidecar: serving 'work'") == peak
    assert "final envelopes: 30 (30 succeeded, 0 failed)" in err


async def test_the_runtime_gets_no_broker_variables_only_its_sidecar_does(tmp_path, amqp_url):
    env = {"ASYA_BROKER_URL": amqp_url, "ASYA_BROKER_PASSWORD": "guest"}

    process, finals, err = await dev_isolated(ENV_APP, ["{}"], tmp_path, amqp_url, env=env)

    assert process.returncode == 0, err
    assert [f["payload"] for f in finals] == [[]]


async def test_a_runtime_that_dies_at_start_ends_the_run_with_exit_2_and_no_process_left(
    tmp_path, amqp_url
):
    # A sidecar may wait for its runtime for as long as this says, deaf to SIGTERM: the run
    # must still end, and soon.
    env = {"ASYA_RUNTIME_WAIT_S": "3600"}

    process, finals, err = await dev_isolated(
        BROKEN_APP, ["{}"], tmp_path, amqp_url, env=env, timeout_s=60
    )

    ours = [line for line in err.splitlines() if line.startswith("asya: ")]
    assert process.returncode == 2, err
    assert ours[1:] == ["asya: load/runtime (worker 0) exited with code 2 (see its output above)"]
    assert "weights not found" in err
    assert "Traceback" not in err
    assert finals == []
    assert group_pids(process.pid) == set()
    assert await queues_left(amqp_url, namespace_of(err), ["load"]) == []
