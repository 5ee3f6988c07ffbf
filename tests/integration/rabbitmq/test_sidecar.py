"""The sidecar process: clear errors, retries without tracebacks, probes that answer."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys


async def start_sidecar(**env: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "asya_sidecar.main",
        env={**os.environ, "ASYA_HEALTH_PORT": "0", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


async def read_until(process, text: str, timeout_s: float = 30) -> str:
    seen = ""
    async with asyncio.timeout(timeout_s):
        while text not in seen:
            line = await process.stdout.readline()
            if not line:
                break
            seen += line.decode()
    return seen


async def test_wrong_credentials_say_so_and_are_retried_without_tracebacks(namespace):
    process = await start_sidecar(
        ASYA_ACTOR="a",
        ASYA_NAMESPACE=namespace,
        ASYA_BROKER_URL="amqp://guest:wrong-password@127.0.0.1:5672/",
    )

    seen = await read_until(process, "retrying in", timeout_s=30)
    seen += await read_until(process, "retrying in", timeout_s=30)
    process.send_signal(signal.SIGTERM)
    rest, _ = await asyncio.wait_for(process.communicate(), 30)

    assert "refused the credentials" in seen
    assert "amqp://guest:***@127.0.0.1" in seen
    assert seen.count("retrying in") >= 2
    assert "Traceback" not in seen + rest.decode()
    assert process.returncode == 0


async def test_an_unreachable_broker_says_where_it_looked(namespace):
    process = await start_sidecar(
        ASYA_ACTOR="a", ASYA_NAMESPACE=namespace, ASYA_BROKER_URL="amqp://guest:guest@127.0.0.1:1/"
    )

    seen = await read_until(process, "retrying in")
    process.send_signal(signal.SIGTERM)
    await asyncio.wait_for(process.communicate(), 30)

    assert "cannot reach the broker at amqp://guest:***@127.0.0.1:1/" in seen


async def test_missing_settings_stop_the_sidecar_at_start_with_what_to_set():
    process = await start_sidecar(ASYA_BROKER_URL="amqp://guest:guest@127.0.0.1:5672/")

    out, _ = await asyncio.wait_for(process.communicate(), 30)

    assert process.returncode == 2
    assert "ASYA_ACTOR is not set" in out.decode()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_health_probes_answer_once_serving(amqp_url, namespace, transport, actor_names):
    actor_names.add("happy-end")
    port = free_port()
    process = await start_sidecar(
        ASYA_ACTOR="happy-end",
        ASYA_NAMESPACE=namespace,
        ASYA_BROKER_URL=amqp_url,
        ASYA_HEALTH_PORT=str(port),
    )
    await read_until(process, "serving")

    answers = {}
    for path in ("/healthz", "/readyz", "/nope"):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        answers[path] = (await reader.read()).split(b"\r\n", 1)[0]
        writer.close()
    process.send_signal(signal.SIGTERM)
    await asyncio.wait_for(process.communicate(), 30)

    assert answers == {
        "/healthz": b"HTTP/1.1 200 OK",
        "/readyz": b"HTTP/1.1 200 OK",
        "/nope": b"HTTP/1.1 404 Not Found",
    }
    assert process.returncode == 0


async def probe(port: int, path: str) -> int:
    """The HTTP status the sidecar answers on `path`."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    status = int((await reader.read()).split(b" ", 2)[1])
    writer.close()
    return status


async def start_runtime(tmp_path, actor: str, socket_path: str) -> asyncio.subprocess.Process:
    (tmp_path / "late_handlers.py").write_text(
        f"from asya import actor\n\n@actor(name='{actor}')\ndef handle(doc):\n    return doc\n"
    )
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "asya.runtime",
        env={
            **os.environ,
            "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "ASYA_HANDLER": "late_handlers:handle",
            "ASYA_SOCKET_PATH": socket_path,
        },
        stdin=subprocess.DEVNULL,
    )


async def start_waiting_sidecar(amqp_url, namespace, tmp_path, port: int):
    """A sidecar for actor 'late' whose runtime is not there, past its ASYA_RUNTIME_WAIT_S."""
    process = await start_sidecar(
        ASYA_ACTOR="late",
        ASYA_NAMESPACE=namespace,
        ASYA_BROKER_URL=amqp_url,
        ASYA_HEALTH_PORT=str(port),
        ASYA_SOCKET_PATH=str(tmp_path / "late.sock"),
        ASYA_RUNTIME_WAIT_S="0.2",
    )
    seen = await read_until(process, "runtime not answering since start")
    assert "runtime not answering since start" in seen, seen
    return process


async def test_the_sidecar_waits_at_start_for_a_runtime_that_comes_late(
    amqp_url, namespace, transport, actor_names, tmp_path
):
    actor_names.add("late")
    port = free_port()
    sidecar = await start_waiting_sidecar(amqp_url, namespace, tmp_path, port)
    while_waiting = (await probe(port, "/healthz"), await probe(port, "/readyz"))

    runtime = await start_runtime(tmp_path, "late", str(tmp_path / "late.sock"))
    seen = await read_until(sidecar, "serving 'late'")
    once_served = await probe(port, "/readyz")
    sidecar.send_signal(signal.SIGTERM)
    await asyncio.wait_for(sidecar.communicate(), 30)
    runtime.send_signal(signal.SIGTERM)
    await asyncio.wait_for(runtime.wait(), 30)

    assert while_waiting == (200, 503)
    assert "serving 'late'" in seen
    assert once_served == 200
    assert sidecar.returncode == 0


async def test_sigterm_while_waiting_for_the_runtime_exits_0(
    amqp_url, namespace, transport, actor_names, tmp_path
):
    actor_names.add("late")
    sidecar = await start_waiting_sidecar(amqp_url, namespace, tmp_path, free_port())

    sidecar.send_signal(signal.SIGTERM)
    rest, _ = await asyncio.wait_for(sidecar.communicate(), 10)

    assert sidecar.returncode == 0
    assert "Traceback" not in rest.decode()
