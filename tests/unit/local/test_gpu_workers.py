"""The in-process mesh gives each worker of a GPU actor its own devices, or makes it wait."""

from __future__ import annotations

import asyncio
import logging
import random

from asya import actor
from asya.actor import REGISTRY
from asya.client import Client
from asya.clock import SystemClock
from asya.gpu import Inventory
from asya.handler import LocalInvoker
from asya.local.gpus import GpuAssigner, GpuMode, GpuWorkers
from asya.local.mesh import Mesh, MeshHooks, MeshOptions
from asya.transport.memory import MemoryTransport
from tests.unit.gpu.nvml_double import gpu


class Finals(MeshHooks):
    """Observer and sink: sets `done` once `expected` envelopes are final."""

    def __init__(self, expected):
        self.expected = expected
        self.envelopes = []
        self.done = asyncio.Event()

    def on_workers(self, actor, workers):
        pass

    async def record(self, envelope):
        self.envelopes.append(envelope)
        if len(self.envelopes) == self.expected:
            self.done.set()


class Launches:
    """The GPU workers' invoker factory: records each worker's CUDA_VISIBLE_DEVICES and runs the
    handler in-process (the processes themselves are tested in tests/integration/gpu)."""

    def __init__(self, until):
        self.visible = {}
        self.until = until
        self.reached = asyncio.Event()

    def __call__(self, spec, assignment):
        self.visible[assignment.worker] = assignment.environment()["CUDA_VISIBLE_DEVICES"]
        if len(self.visible) == self.until:
            self.reached.set()
        return LocalInvoker(spec)


class Said(logging.Handler):
    def __init__(self, message):
        super().__init__()
        self.message = message
        self.seen = asyncio.Event()

    def emit(self, record):
        if record.getMessage() == self.message:
            self.seen.set()


def mesh(transport, finals, devices, launches, **options):
    gpus = GpuWorkers(
        GpuAssigner(Inventory(devices=tuple(gpu(i) for i in range(devices)))), launches
    )
    return Mesh(
        tuple(REGISTRY),
        transport=transport,
        hooks=finals,
        sink=finals,
        clock=SystemClock(),
        rng=random.Random(1),
        options=MeshOptions(poll_interval_s=0.01, **options),
        gpus=gpus,
    ), gpus


async def send(transport, count):
    client = Client(transport)
    for n in range(count):
        await client.send(["embed"], {"n": n})


async def test_each_worker_gets_a_device_of_its_own_and_the_one_with_none_left_waits():
    release = asyncio.Event()
    said = Said("GPU actor waits: not enough GPUs free")
    logging.getLogger("asya.local.gpus").addHandler(said)

    @actor(gpus=1, max_replicas=3, queue_length=1)
    async def embed(doc):
        await release.wait()
        return doc

    transport, finals, launches = MemoryTransport(), Finals(6), Launches(until=2)
    running, gpus = mesh(transport, finals, 2, launches)
    try:
        async with running:
            await send(transport, 6)
            async with asyncio.timeout(10):
                await said.seen.wait()

            assert sorted(launches.visible.values()) == ["GPU-0", "GPU-1"]
            assert running.workers("embed") == 2
            assert gpus.assigner.free() == ()

            release.set()
            async with asyncio.timeout(10):
                await running.wait(finals.done.wait())
    finally:
        logging.getLogger("asya.local.gpus").removeHandler(said)

    assert len(finals.envelopes) == 6
    assert [d.uuid for d in gpus.assigner.free()] == ["GPU-0", "GPU-1"]


async def test_with_cpu_fallback_workers_beyond_the_devices_start_with_no_gpu_visible():
    release = asyncio.Event()

    @actor(gpus=1, max_replicas=3, queue_length=1, cpu_fallback=True)
    async def embed(doc):
        await release.wait()
        return doc

    transport, finals, launches = MemoryTransport(), Finals(6), Launches(until=3)
    running, _ = mesh(transport, finals, 1, launches)
    async with running:
        await send(transport, 6)
        async with asyncio.timeout(10):
            await launches.reached.wait()
        release.set()
        async with asyncio.timeout(10):
            await running.wait(finals.done.wait())

    assert sorted(launches.visible.values()) == ["", "", "GPU-0"]


async def test_in_process_mode_runs_a_gpu_actor_like_any_other_without_reading_the_machine():
    @actor(gpus=1)
    def embed(doc):
        return {**doc, "seen": True}

    transport, finals = MemoryTransport(), Finals(1)
    running = Mesh(
        tuple(REGISTRY),
        transport=transport,
        hooks=finals,
        sink=finals,
        clock=SystemClock(),
        rng=random.Random(1),
        options=MeshOptions(poll_interval_s=0.01, gpu_mode=GpuMode.IN_PROCESS),
    )
    async with running:
        await send(transport, 1)
        async with asyncio.timeout(10):
            await running.wait(finals.done.wait())

    assert finals.envelopes[0].payload == {"n": 0, "seen": True}


async def test_a_mesh_says_once_at_start_that_an_actor_no_machine_could_serve_runs_on_cpu():
    # asya serve's mesh reads this machine's GPUs itself; 64 per worker is more than any has.
    @actor(gpus=64, cpu_fallback=True)
    def embed(doc):
        return doc

    records = []
    said = logging.Handler()
    said.emit = records.append
    logging.getLogger("asya.local.mesh").addHandler(said)
    try:
        transport, finals = MemoryTransport(), Finals(1)
        async with Mesh(
            tuple(REGISTRY),
            transport=transport,
            hooks=finals,
            sink=finals,
            clock=SystemClock(),
            rng=random.Random(1),
            options=MeshOptions(poll_interval_s=0.01),
        ):
            pass
    finally:
        logging.getLogger("asya.local.mesh").removeHandler(said)

    assert [r.getMessage() for r in records] == [
        "GPU actors run on CPU: too few GPUs on this machine"
    ]
    assert records[0].actors == "embed"
