"""A GPU actor's workers really run in processes of their own, each seeing only its devices."""

from __future__ import annotations

import asyncio
import importlib
import os
import random
import sys
import textwrap

import pytest

from asya.client import Client
from asya.clock import SystemClock
from asya.gpu import Inventory
from asya.local.gpus import GpuAssigner, GpuWorkers, process_invokers
from asya.local.mesh import Mesh, MeshHooks, MeshOptions
from asya.transport.memory import MemoryTransport
from tests.unit.gpu.nvml_double import gpu

PROBE = """
    import asyncio, os
    from asya import actor

    RELEASE = "{release}"

    @actor(gpus=1, max_replicas=3, queue_length=1, cpu_fallback=True)
    def probe(doc):
        # Hold each call until every worker has taken one, so all three workers start.
        while not os.path.exists(RELEASE):
            import time; time.sleep(0.01)
        return {{"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid()}}
"""


class Finals(MeshHooks):
    def __init__(self, expected):
        self.expected, self.envelopes, self.done = expected, [], asyncio.Event()
        self.all_workers = asyncio.Event()

    def on_workers(self, actor, workers):
        if workers == self.expected:
            self.all_workers.set()

    async def record(self, envelope):
        self.envelopes.append(envelope)
        if len(self.envelopes) == self.expected:
            self.done.set()


@pytest.fixture
def probe_module(tmp_path, monkeypatch):
    release = tmp_path / "release"
    (tmp_path / "gpu_probe_app.py").write_text(textwrap.dedent(PROBE.format(release=release)))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("gpu_probe_app")
    yield module, release
    sys.modules.pop("gpu_probe_app", None)


async def test_each_worker_process_sees_its_own_gpu_and_the_fallback_one_sees_none(probe_module):
    module, release = probe_module
    transport, finals = MemoryTransport(), Finals(3)
    # No call queued behind a running one: each of the three envelopes takes its own worker.
    gpus = GpuWorkers(
        GpuAssigner(Inventory(devices=(gpu(0), gpu(1)))),
        process_invokers(dict(os.environ), depth=0),
    )
    mesh = Mesh(
        (module.probe.__asya_actor__,),
        transport=transport,
        hooks=finals,
        sink=finals,
        clock=SystemClock(),
        rng=random.Random(1),
        options=MeshOptions(poll_interval_s=0.01, depth=0),
        gpus=gpus,
    )
    async with mesh:
        client = Client(transport)
        for n in range(3):
            await client.send(["probe"], {"n": n})
        async with asyncio.timeout(60):  # each worker's processes start in turn
            await mesh.wait(finals.all_workers.wait())
        release.write_text("go")
        async with asyncio.timeout(60):
            await mesh.wait(finals.done.wait())

    results = [e.payload for e in finals.envelopes]
    assert sorted(r["visible"] for r in results) == ["", "GPU-0", "GPU-1"]
    assert len({r["pid"] for r in results}) == 3
    assert os.getpid() not in {r["pid"] for r in results}
