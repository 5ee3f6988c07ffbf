"""A class actor in a worker process (pods, `asya serve`, GPU workers) is closed when the
worker stops: its `close()` runs in that process, after its last call."""

from __future__ import annotations

import os
import textwrap

from asya.outcome import Success
from asya.runtime.workers import ProcessInvoker
from tests.factories import envelope

HANDLERS = """
import os
from pathlib import Path

from asya import actor

HERE = Path(os.environ["CLOSE_DIR"])


@actor(timeout_s=30)
class Model:
    def __init__(self):
        (HERE / f"init-{os.getpid()}").write_text("")

    def __call__(self, doc):
        return doc

    def close(self):
        (HERE / f"close-{os.getpid()}").write_text("")
"""


async def test_each_worker_closes_its_instance_in_its_own_process_when_it_stops(tmp_path):
    (tmp_path / "close_handlers.py").write_text(textwrap.dedent(HANDLERS))
    env = {
        **os.environ,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "CLOSE_DIR": str(tmp_path),
    }
    invoker = ProcessInvoker("close_handlers:Model", env=env, workers=2)
    await invoker.start()
    try:
        [outcome] = await invoker.invoke([envelope("model", ["next"])])
        closed_while_running = sorted(p.name for p in tmp_path.glob("close-*"))
    finally:
        await invoker.aclose()

    made = {p.name.removeprefix("init-") for p in tmp_path.glob("init-*")}
    closed = {p.name.removeprefix("close-") for p in tmp_path.glob("close-*")}
    assert isinstance(outcome, Success)
    assert closed_while_running == []
    assert len(made) == 2
    assert closed == made
