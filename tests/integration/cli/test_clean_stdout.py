"""stdout carries only finals: whatever a handler writes goes to stderr, in every mode.

A handler's `print`, a write to `sys.stdout` and a child process it starts all write to
stdout; `asya dev` in-process (threads and async handlers), a GPU actor's worker processes,
`--isolate`'s runtime processes, `asya send --app` and the runtime's worker processes (as
`asya serve` and a pod run them) must keep all of it off stdout.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from asya.outcome import Success
from tests.integration.cli.processes import start_asya
from tests.integration.runtime.processes import Runtime, call, connect

PRINTING_APP = """
import subprocess
import sys

from asya import actor

ROUTE = ["shout", "whisper", "crunch"]

print("printing_app: imported")


@actor
def shout(doc):
    print("shout: a print")
    sys.stdout.write("shout: a write to sys.stdout\\n")
    subprocess.run(["echo", "shout: a child process"], check=True)
    return doc


@actor
async def whisper(doc):
    print("whisper: a print from an async handler")
    return doc


@actor(gpus=1, cpu_fallback=True)
def crunch(doc):
    print("crunch: a print from a GPU worker")
    return doc
"""

SAID = (
    "shout: a print",
    "shout: a write to sys.stdout",
    "shout: a child process",
    "whisper: a print from an async handler",
    "crunch: a print from a GPU worker",
)


async def run_asya(tmp_path, *args: str) -> tuple[int, str, str]:
    process = await start_asya(*args)
    out, err = await asyncio.wait_for(process.communicate(), 180)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def write_app(tmp_path) -> str:
    path = tmp_path / "printing_app.py"
    path.write_text(PRINTING_APP)
    return str(path)


@pytest.mark.parametrize("mode", ["memory", "isolate"])
async def test_what_handlers_print_goes_to_stderr_and_stdout_holds_only_finals(
    tmp_path, mode, mode_args
):
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('{"n": 1}\n{"n": 2}\n')

    code, out, err = await run_asya(
        tmp_path, "dev", write_app(tmp_path), "--input", str(inputs), *mode_args
    )

    assert code == 0, err
    finals = [json.loads(line) for line in out.splitlines()]
    assert sorted(f["payload"]["n"] for f in finals) == [1, 2]
    assert "printing_app: imported" in err
    for said in SAID:
        assert err.count(said) == 2, (said, err)


async def test_asya_send_in_memory_prints_only_the_final_on_stdout(tmp_path):
    code, out, err = await run_asya(
        tmp_path, "send", "--app", write_app(tmp_path), "--payload", '{"n": 1}'
    )

    assert code == 0, err
    [final] = [json.loads(line) for line in out.splitlines()]
    assert final["payload"] == {"n": 1}
    for said in SAID:
        assert said in err, (said, err)


async def test_a_runtime_worker_sends_what_its_handler_prints_to_stderr(tmp_path):
    # `asya serve` and a pod run handlers in these worker processes, which inherit stdout.
    (tmp_path / "loud_mod.py").write_text(PRINTING_APP)
    socket_path = str(tmp_path / "rt.sock")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "asya.runtime",
        env={
            **os.environ,
            "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "ASYA_HANDLER": "loud_mod:shout",
            "ASYA_SOCKET_PATH": socket_path,
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    runtime = Runtime(process, socket_path)
    client = await connect(runtime)
    [outcome] = await client.invoke(call({"n": 1}, "shout"))
    await client.aclose()
    process.terminate()
    out, err = await asyncio.wait_for(process.communicate(), 60)

    assert isinstance(outcome, Success)
    assert out == b""
    for said in SAID[:3]:
        assert said in err.decode(), (said, err)
