"""Worker processes never outlive their parent, and a call past its timeout never outlives its
worker: `kill -9` of `asya serve`, of the runtime or of `asya dev` takes the workers with it,
and `asya serve` kills a sync handler stuck in a busy loop and replaces its worker.

Each handler prints `worker PID` on stderr as it starts, so the tests know which processes to
watch; what they assert is whether those processes exist, never how long anything took.
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys
import textwrap

import pytest

from asya.client import Client
from asya.envelope import Phase, Reason
from tests.integration.cli.processes import (
    is_alive,
    read_stderr_until,
    start_asya,
    wait_until_gone,
)
from tests.integration.runtime.processes import call, connect, start_runtime

SPIN_APP = """
import os
import sys

from asya import RetryPolicy, actor


@actor(timeout_s={timeout_s}, retry=RetryPolicy(max_attempts=1){gpus})
def spin(doc):
    print(f"worker {{os.getpid()}}", file=sys.stderr, flush=True)
    while doc.get("spin"):
        pass
    return {{"pid": os.getpid()}}
"""


def spin_source(*, timeout_s: float = 0.5, gpus: str = "") -> str:
    return textwrap.dedent(SPIN_APP.format(timeout_s=timeout_s, gpus=gpus))


def spin_app(tmp_path, *, timeout_s: float = 0.5, gpus: str = "") -> str:
    """A handler that spins; its timeout long (600 s) where the test kills its parent mid-call."""
    path = tmp_path / "spin_app.py"
    path.write_text(spin_source(timeout_s=timeout_s, gpus=gpus))
    return str(path)


async def worker_pid(process) -> int:
    seen = await read_stderr_until(process, r"worker \d+\n")
    return int(re.findall(r"worker (\d+)", seen)[-1])


async def gone_after_kill_9(process, workers: set[int]) -> set[int]:
    """`kill -9` the parent; which of its workers are still alive (a bound well under the
    30 s grace a worker would take to leave on its own when its socket closes)."""
    process.send_signal(signal.SIGKILL)
    # Not `process.wait()` first: it also waits for the stderr pipe, which the workers hold.
    alive = await wait_until_gone(workers, timeout_s=10)
    await process.wait()
    return alive


async def test_asya_serve_kills_a_handler_stuck_past_its_timeout_and_replaces_its_worker(
    tmp_path, amqp_url, namespace, actor_names, finals
):
    actor_names.add("spin")
    process = await start_asya(
        "serve", spin_app(tmp_path), "--broker", amqp_url, "--namespace", namespace, "--no-ends"
    )
    await read_stderr_until(process, "asya: serving")
    async with Client(amqp_url, namespace=namespace) as client:
        await client.send(["spin"], {"spin": True})
        stuck = await worker_pid(process)
        [failed] = await finals.wait_for(1)
        await client.send(["spin"], {"spin": False})
        replacement = await worker_pid(process)
        [_, done] = await finals.wait_for(2)
    stuck_alive = is_alive(stuck)
    process.send_signal(signal.SIGTERM)
    await asyncio.wait_for(process.communicate(), 60)

    assert failed.status.phase is Phase.FAILED
    assert failed.status.reason is Reason.TIMEOUT
    assert not stuck_alive  # killed with its worker, not left spinning on a thread
    assert replacement != stuck
    assert done.payload == {"pid": replacement}
    assert process.returncode == 0


async def test_kill_9_of_asya_serve_takes_its_busy_worker_with_it(
    tmp_path, amqp_url, namespace, actor_names
):
    actor_names.add("spin")
    app = spin_app(tmp_path, timeout_s=600)
    process = await start_asya(
        "serve", app, "--broker", amqp_url, "--namespace", namespace, "--no-ends"
    )
    await read_stderr_until(process, "asya: serving")
    async with Client(amqp_url, namespace=namespace) as client:
        await client.send(["spin"], {"spin": True})
        busy = await worker_pid(process)

    assert await gone_after_kill_9(process, {busy}) == set()


async def test_kill_9_of_the_runtime_takes_its_busy_worker_with_it(tmp_path):
    runtime = await start_runtime(tmp_path, spin_source(timeout_s=600), "handlers_mod:spin")
    client = await connect(runtime)
    calling = asyncio.create_task(client.invoke(call({"spin": True}, actor="spin")))
    busy = await worker_pid(runtime.process)
    alive = await gone_after_kill_9(runtime.process, {busy})
    calling.cancel()
    await client.aclose()

    assert alive == set()


@pytest.mark.skipif(sys.platform != "linux", reason="the kernel's parent-death signal is Linux's")
async def test_kill_9_of_asya_dev_takes_its_gpu_workers_with_them(tmp_path):
    app = spin_app(tmp_path, timeout_s=600, gpus=", gpus=1, cpu_fallback=True")
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text('{"spin": true}\n')
    process = await start_asya("dev", app, "--input", str(inputs), "--route", "spin")
    busy = await worker_pid(process)

    assert await gone_after_kill_9(process, {busy}) == set()
