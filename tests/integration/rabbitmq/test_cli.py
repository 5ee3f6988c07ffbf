"""The command line against a real broker: asya dev --broker / --isolate, asya send --broker."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter

from tests.integration.cli.processes import QUICKSTART, ROOT, run_asya


async def test_dev_on_a_broker_gives_the_same_finals_as_in_memory(amqp_url):
    code, out, err = await run_asya(
        "dev",
        str(QUICKSTART),
        "--input",
        str(QUICKSTART / "inputs.jsonl"),
        "--broker",
        amqp_url,
        "--quiet",
    )

    finals = [json.loads(line) for line in out.splitlines()]
    assert code == 0, err
    assert len(finals) == 58
    assert {f["status"]["phase"] for f in finals} == {"succeeded"}


async def test_dev_isolated_runs_real_pods_and_every_failure_path_ends_in_error_end(amqp_url):
    code, out, err = await run_asya(
        "dev",
        str(QUICKSTART),
        "--input",
        str(QUICKSTART / "bad-inputs.jsonl"),
        "--broker",
        amqp_url,
        "--isolate",
    )

    reasons = Counter(json.loads(line)["status"]["reason"] for line in out.splitlines())
    assert code == 1
    assert reasons == {
        None: 5,
        "MalformedEnvelope": 3,
        "UnknownActor": 1,
        "HandlerError": 1,
        "Timeout": 1,
        "HopLimitExceeded": 1,
        "DeadlineExceeded": 1,
        "PayloadTooLarge": 1,
    }
    # Each actor scales from zero: one pod (runtime + sidecar) per worker it ever had.
    peaks = [int(p) for p in re.findall(r"^[a-z-]+(?:\s+\S+){6}\s+(\d+)$", err, re.M)]
    assert len(peaks) == 5
    assert err.count("asya-sidecar: serving") == sum(peaks)
    assert "Traceback" not in err


async def test_ctrl_c_stops_an_isolated_run_and_every_process_it_started(amqp_url, tmp_path):
    slow = tmp_path / "slow.jsonl"
    slow.write_text(json.dumps({"text": "Fine, I guess.", "review_delay_s": 30}) + "\n")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "asya.cli",
        "dev",
        str(QUICKSTART),
        "--input",
        str(slow),
        "--broker",
        amqp_url,
        "--isolate",
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    seen = b""
    while b"asya-sidecar: serving 'review'" not in seen:  # the slow document's last actor
        line = await asyncio.wait_for(process.stderr.readline(), 60)
        assert line, seen.decode()
        seen += line

    os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does to the group
    _, err = await asyncio.wait_for(process.communicate(), 60)
    pgrep = await asyncio.create_subprocess_exec(
        "pgrep", "-g", str(process.pid), stdout=subprocess.PIPE
    )
    left = (await pgrep.communicate())[0].split()

    assert process.returncode == 130, (seen + err).decode(errors="replace")[-3000:]
    assert left == []


async def test_send_on_a_broker_publishes_and_with_wait_prints_the_final(
    pods, transport, finals, amqp_url, namespace
):
    handlers = "from asya import actor\n@actor\ndef upper(doc):\n    return doc.upper()\n"
    await pods(handlers, "upper")

    code, out, err = await run_asya(
        "send",
        "--broker",
        amqp_url,
        "--namespace",
        namespace,
        "--route",
        "upper",
        "--payload",
        '"hi"',
        "--wait",
        timeout_s=60,
    )
    sent_code, sent_out, _ = await run_asya(
        "send",
        "--broker",
        amqp_url,
        "--namespace",
        namespace,
        "--route",
        "upper",
        "--payload",
        '"x"',
        timeout_s=60,
    )

    assert code == 0, err
    assert json.loads(out)["payload"] == "HI"
    assert sent_code == 0
    assert len(json.loads(sent_out)["id"]) == 26


async def test_send_to_an_actor_without_a_queue_fails_loudly(amqp_url, namespace):
    code, _, err = await run_asya(
        "send",
        "--broker",
        amqp_url,
        "--namespace",
        namespace,
        "--route",
        "ghost",
        "--payload",
        "{}",
        timeout_s=60,
    )

    assert code == 2
    assert "no queue for actor 'ghost'" in err
