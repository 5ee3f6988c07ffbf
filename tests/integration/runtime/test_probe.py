"""`python -m asya.runtime.probe`, the runtime container's liveness and startup check in a pod."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap

import pytest

from tests.integration.runtime.processes import call, connect, start_runtime

HANDLERS = textwrap.dedent(
    """
    import time
    from asya import actor

    @actor
    def work(doc):
        time.sleep(doc.get("sleep_s", 0))
        return doc
    """
)


async def probe(socket_path: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "asya.runtime.probe",
        "--timeout",
        "5",
        env={**os.environ, "ASYA_SOCKET_PATH": socket_path},
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await process.communicate()
    assert process.returncode is not None
    return process.returncode, stderr.decode()


@pytest.fixture
async def runtime(tmp_path):
    rt = await start_runtime(tmp_path, HANDLERS, "handlers_mod:work")
    client = await connect(rt)
    yield rt, client
    await client.aclose()
    await rt.stop()


async def test_the_probe_fails_naming_the_socket_when_no_runtime_listens(tmp_path):
    socket_path = str(tmp_path / "nothing.sock")

    code, stderr = await probe(socket_path)

    assert code == 1
    assert "asya runtime probe: no answer" in stderr
    assert socket_path in stderr


async def test_the_probe_passes_when_the_runtime_serves(runtime):
    rt, _ = runtime

    code, stderr = await probe(rt.socket_path)

    assert (code, stderr) == (0, "")


async def test_the_probe_passes_while_the_runtime_is_busy_with_a_long_call(runtime):
    rt, client = runtime
    busy = asyncio.create_task(client.invoke(call({"sleep_s": 3})))

    code, _ = await probe(rt.socket_path)
    answered_while_busy = not busy.done()
    await busy

    assert code == 0
    assert answered_while_busy
