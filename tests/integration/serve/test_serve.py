"""`asya serve` as a real process on the broker: clients in other processes, SIGTERM, probes."""

from __future__ import annotations

import asyncio
import collections
import json
import re
import signal

import pytest

from asya.client import Client
from tests.integration.cli.processes import read_stderr_until, start_asya

FAN_OUT_APP = """
from asya import actor

ROUTE = ["split", "shout"]


@actor
def split(doc):
    for word in doc["text"].split():
        yield {"text": word}


@actor
def shout(doc):
    return {"text": doc["text"].upper()}
"""

SLOW_APP = """
import os
import sys
import time

from asya import actor


@actor(max_replicas=3, queue_length=2)
def slow(doc):
    print(f"begin {doc['n']}", file=sys.stderr, flush=True)
    time.sleep(1)
    # The process that serves it: `asya serve` runs sync handlers in worker processes.
    return {**doc, "pid": os.getppid()}
"""


@pytest.fixture
def app_file(tmp_path):
    def write(source: str) -> str:
        path = tmp_path / "served_app.py"
        path.write_text(source)
        return str(path)

    return write


async def serve(app: str, amqp_url: str, namespace: str, *args: str):
    process = await start_asya("serve", app, "--broker", amqp_url, "--namespace", namespace, *args)
    await read_stderr_until(process, "asya: serving")
    return process


async def terminate(process) -> str:
    """SIGTERM, as `docker stop` or systemd sends it; the rest of stderr once it has exited."""
    process.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(process.communicate(), 60)
    return err.decode()


async def a_call_in_flight(process, finals) -> tuple[str, int]:
    """stderr up to a `begin N` line whose N is not final yet, and N: a call in flight."""
    seen = ""
    while True:
        seen += await read_stderr_until(process, r"begin \d+\n")
        n = int(re.findall(r"begin (\d+)", seen)[-1])
        if n not in {e.payload["n"] for e in finals.envelopes}:
            return seen, n


async def probe(port: int, path: str) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    status = int((await reader.read()).split(b" ", 2)[1])
    writer.close()
    await writer.wait_closed()
    return status


async def test_a_fan_out_sent_from_another_process_reaches_the_ends_leaf_by_leaf(
    app_file, amqp_url, namespace, actor_names, finals
):
    actor_names.update({"split", "shout"})
    process = await serve(app_file(FAN_OUT_APP), amqp_url, namespace, "--no-ends")

    async with Client(amqp_url, namespace=namespace) as client:
        sent = await client.send(["split", "shout"], {"text": "one two three"})
    leaves = await finals.wait_for(3)
    err = await terminate(process)

    assert {e.id: e.payload for e in leaves} == {
        f"{sent}-1": {"text": "ONE"},
        f"{sent}-2": {"text": "TWO"},
        f"{sent}-3": {"text": "THREE"},
    }
    assert process.returncode == 0, err


async def test_asya_send_wait_gets_every_leaf_of_a_fan_out_from_the_end_actors_of_asya_serve(
    app_file, amqp_url, namespace, actor_names, transport
):
    actor_names.update({"split", "shout"})
    process = await serve(app_file(FAN_OUT_APP), amqp_url, namespace)

    sender = await start_asya(
        "send",
        "--broker",
        amqp_url,
        "--namespace",
        namespace,
        "--route",
        "split,shout",
        "--payload",
        '{"text": "one two three"}',
        "--wait",
        "--timeout",
        "30",
    )
    out, sender_err = await asyncio.wait_for(sender.communicate(), 60)
    err = await terminate(process)

    assert sender.returncode == 0, sender_err.decode()
    finals = [json.loads(line) for line in out.decode().splitlines()]
    assert [f["payload"] for f in finals] == [{"text": "ONE"}, {"text": "TWO"}, {"text": "THREE"}]
    assert {f["status"]["phase"] for f in finals} == {"succeeded"}
    assert process.returncode == 0, err


async def test_sigterm_mid_stream_finishes_what_is_in_flight_and_loses_nothing(
    app_file, amqp_url, namespace, actor_names, finals
):
    actor_names.add("slow")
    app = app_file(SLOW_APP)
    first = await serve(app, amqp_url, namespace, "--no-ends")
    async with Client(amqp_url, namespace=namespace) as client:
        sent = [await client.send(["slow"], {"n": n}) for n in range(12)]
    await finals.wait_for(3)
    seen, in_flight = await a_call_in_flight(first, finals)

    err = seen + await terminate(first)
    second = await serve(app, amqp_url, namespace, "--no-ends")
    await finals.wait_for(12)
    await terminate(second)

    assert first.returncode == 0, err
    assert "Traceback" not in err
    by_n = {e.payload["n"]: e.payload["pid"] for e in finals.envelopes}
    assert by_n[in_flight] == first.pid  # finished within the grace, not cut off and redone
    assert set(by_n.values()) == {first.pid, second.pid}  # the rest was given back
    counts = collections.Counter(e.id for e in finals.envelopes)
    assert set(counts) == set(sent)
    assert set(counts.values()) == {1}  # exactly once: nothing lost, nothing done twice
    assert second.returncode == 0


async def test_probes_answer_200_once_serving(
    app_file, amqp_url, namespace, actor_names, transport
):
    actor_names.update({"split", "shout"})
    process = await start_asya(
        "serve",
        app_file(FAN_OUT_APP),
        "--broker",
        amqp_url,
        "--namespace",
        namespace,
        "--health-port",
        "0",
    )
    seen = await read_stderr_until(process, "asya: serving")
    port = int(re.search(r"probes on port (\d+)", seen).group(1))

    answers = {path: await probe(port, path) for path in ("/healthz", "/readyz", "/nope")}
    err = await terminate(process)

    assert answers == {"/healthz": 200, "/readyz": 200, "/nope": 404}
    assert process.returncode == 0, err


async def test_an_unreachable_broker_is_retried_one_line_at_a_time_until_sigterm(app_file):
    process = await start_asya(
        "serve",
        app_file(FAN_OUT_APP),
        "--broker",
        "amqp://guest:guest@127.0.0.1:1/",
        "--health-port",
        "0",
    )
    seen = await read_stderr_until(process, "retrying in")
    seen += await read_stderr_until(process, "retrying in")  # and again, after a backoff
    port = int(re.search(r"probes on port (\d+)", seen).group(1))
    answers = {path: await probe(port, path) for path in ("/healthz", "/readyz")}

    err = seen + await terminate(process)

    retries = [line for line in err.splitlines() if "retrying in" in line]
    assert re.fullmatch(
        r"asya: cannot reach the broker at amqp://guest:\*+@127\.0\.0\.1:1/: .+; retrying in"
        r" \d+\.\d s",
        retries[0],
    ), retries[0]
    assert len(retries) >= 2
    assert answers == {"/healthz": 200, "/readyz": 503}  # alive, but not ready to consume
    assert "Traceback" not in err
    assert process.returncode == 0


async def test_only_the_actors_named_are_served_and_each_is_in_the_status_line(
    app_file, amqp_url, namespace, actor_names, transport
):
    actor_names.update({"split", "shout"})
    process = await serve(
        app_file(FAN_OUT_APP), amqp_url, namespace, "--actors", "shout", "--status-every", "0.2"
    )

    seen = await read_stderr_until(process, r"asya: shout workers=.*\n")
    err = seen + await terminate(process)

    assert (
        "asya: shout workers=0 depth=0 processed=0 failed=0 | finals succeeded=0 failed=0\n" in seen
    )
    assert "split" not in seen
    assert process.returncode == 0, err
