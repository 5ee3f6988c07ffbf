"""Pipeline throughput and latency: 3 hops through real sidecar and runtime processes.

    python bench/pipeline.py [--broker URL] [--envelopes 3000] [--rate 50] [--light 200]

Starts three actors as pods (a `python -m asya.runtime` and an `asya-sidecar` process each)
on the broker, in a namespace of its own, and measures with persistent messages and
publisher confirms on:
- saturation: publish `--envelopes` at once, time until the last reaches happy-end;
- latency: send `--light` envelopes at `--rate` per second, end-to-end p50 and p99;
- the same saturation run with all three actors in this one process (`asya dev --broker`:
  the same consumer chain and guarantees, handlers called in-process), which is the shape
  of Dramatiq's and Celery's workers;
- the same saturation run through a plain aio-pika 3-hop pipeline (consume, publish with
  confirm, ack — what any correct consumer must do), for a ratio on the same broker.
Every process runs on the same event loop (uvloop when installed, as in asya's processes).
Prints one JSON object. Figures are wall-clock on this machine: compare ratios, not seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import aio_pika

from asya import Client, actor, event_loop
from asya.actor import REGISTRY
from asya.clock import SystemClock
from asya.crew.ends import EndActor
from asya.envelope import Envelope
from asya.local.discovery import App
from asya.local.runner import run_dev
from asya.routing import ERROR_END, HAPPY_END
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport

HOPS = ("hop-a", "hop-b", "hop-c")

HANDLERS = textwrap.dedent(
    """
    from asya import actor

    @actor(concurrency=16)
    async def hop_a(doc):
        return {**doc, "a": 1}

    @actor(concurrency=16)
    async def hop_b(doc):
        return {**doc, "b": 1}

    @actor(concurrency=16)
    async def hop_c(doc):
        return {**doc, "c": 1}
    """
)


class Arrivals:
    """The bench's happy-end sink: when each envelope arrived."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.failed = 0
        self._changed = asyncio.Condition()

    async def record(self, envelope: Envelope) -> None:
        async with self._changed:
            if envelope.status.reason is not None:
                self.failed += 1
            self.at[envelope.id] = time.perf_counter()
            self._changed.notify_all()

    async def wait_for(self, count: int, timeout_s: float) -> None:
        async with asyncio.timeout(timeout_s), self._changed:
            await self._changed.wait_for(lambda: len(self.at) >= count)


async def start_pods(url: str, namespace: str, workdir: Path) -> list[asyncio.subprocess.Process]:
    (workdir / "bench_handlers.py").write_text(HANDLERS)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(workdir), os.environ.get("PYTHONPATH", "")]),
        "ASYA_BROKER_URL": url,
        "ASYA_NAMESPACE": namespace,
        "ASYA_HEALTH_PORT": "0",
    }
    processes = []
    for name in HOPS:
        pod = {**env, "ASYA_ACTOR": name, "ASYA_SOCKET_PATH": str(workdir / f"{name}.sock")}
        handler = f"bench_handlers:{name.replace('-', '_')}"
        for argv, extra in (
            (["-m", "asya.runtime"], {"ASYA_HANDLER": handler}),
            (["-m", "asya_sidecar.main"], {}),
        ):
            processes.append(
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    *argv,
                    env={**pod, **extra},
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
    return processes


async def asya_runs(url: str, envelopes: int, rate: float, light: int) -> dict[str, float]:
    namespace = f"bench-{secrets.token_hex(4)}"
    transport = RabbitMQTransport(
        url, RabbitMQOptions(namespace=namespace, connection_name="bench")
    )
    await transport.connect()
    arrivals = Arrivals()
    end = EndActor(
        HAPPY_END, transport=transport, sink=arrivals, clock=SystemClock(), rng=random.Random()
    )
    for name in (*HOPS, HAPPY_END, ERROR_END):
        await transport.declare(name)
    await end.start()
    client = Client(transport)
    with tempfile.TemporaryDirectory(prefix="asya-bench-") as workdir:
        processes = await start_pods(url, namespace, Path(workdir))
        try:
            # Warm up: every pod up and answering before anything is timed.
            await client.send(HOPS, {"warm": True})
            await arrivals.wait_for(1, 60)
            arrivals.at.clear()

            started = time.perf_counter()
            await asyncio.gather(*(client.send(HOPS, {"n": n}) for n in range(envelopes)))
            await arrivals.wait_for(envelopes, 600)
            saturated_s = time.perf_counter() - started
            arrivals.at.clear()

            sent_at: dict[str, float] = {}
            for n in range(light):
                sent_at[await client.send(HOPS, {"n": n})] = time.perf_counter()
                await asyncio.sleep(1 / rate)
            await arrivals.wait_for(light, 120)
            latencies = sorted((arrivals.at[i] - t) * 1000 for i, t in sent_at.items())
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(process.wait(), 30)
            await end.stop(5)
            await transport.delete_queues([*HOPS, HAPPY_END, ERROR_END])
            await transport.aclose()
    return {
        "throughput_per_s": round(envelopes / saturated_s, 1),
        "saturation_s": round(saturated_s, 3),
        "latency_p50_ms": round(statistics.median(latencies), 2),
        "latency_p99_ms": round(latencies[max(0, int(len(latencies) * 0.99) - 1)], 2),
        "failed": arrivals.failed,
    }


async def in_process(url: str, envelopes: int) -> float:
    """Envelopes per second with the three actors in this process, on the broker."""
    for name in HOPS:
        actor(name=name, concurrency=16)(_hop)
    app = App(specs=tuple(REGISTRY), route=HOPS, search_path=None)
    transport = RabbitMQTransport(
        url, RabbitMQOptions(namespace=f"bench-{secrets.token_hex(4)}", connection_name="bench")
    )
    await transport.connect()
    try:
        lines = [json.dumps({"n": n}) for n in range(envelopes)]
        result = await run_dev(
            app,
            lines,
            emit=_drop,
            progress=lambda _: None,
            clock=SystemClock(),
            rng=random.Random(),
            transport=transport,
        )
    finally:
        await transport.delete_queues([*HOPS, HAPPY_END, ERROR_END])
        await transport.aclose()
    return envelopes / result.elapsed_s


async def _hop(doc: dict[str, object]) -> dict[str, object]:
    return {**doc, "hop": 1}


async def _drop(envelope: Envelope) -> None:
    return None


async def raw_aio_pika(url: str, envelopes: int) -> float:
    """Envelopes per second through 3 plain consumer -> publish(confirm) -> ack hops."""
    prefix = f"bench-raw-{secrets.token_hex(4)}"
    connection = await aio_pika.connect_robust(url)
    names = [f"{prefix}-{i}" for i in range(4)]
    done = asyncio.Event()
    count = 0
    setup = await connection.channel()
    for name in names:
        await setup.declare_queue(name, durable=True, arguments={"x-queue-type": "quorum"})

    async def hop(source: str, target: str) -> None:
        channel = await connection.channel(publisher_confirms=True)
        await channel.set_qos(prefetch_count=16)
        queue = await channel.get_queue(source)

        async def handle(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            body = json.loads(message.body)
            body[source] = 1
            await channel.default_exchange.publish(
                aio_pika.Message(
                    json.dumps(body).encode(), delivery_mode=aio_pika.DeliveryMode.PERSISTENT
                ),
                routing_key=target,
            )
            await message.ack()

        await queue.consume(handle)

    async def sink() -> None:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=64)
        queue = await channel.get_queue(names[-1])

        async def handle(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            nonlocal count
            await message.ack()
            count += 1
            if count >= envelopes:
                done.set()

        await queue.consume(handle)

    for source, target in itertools.pairwise(names):
        await hop(source, target)
    await sink()
    publisher = await connection.channel(publisher_confirms=True)
    started = time.perf_counter()
    await asyncio.gather(
        *(
            publisher.default_exchange.publish(
                aio_pika.Message(
                    json.dumps({"n": n}).encode(), delivery_mode=aio_pika.DeliveryMode.PERSISTENT
                ),
                routing_key=names[0],
            )
            for n in range(envelopes)
        )
    )
    await asyncio.wait_for(done.wait(), 600)
    elapsed = time.perf_counter() - started
    await connection.close()  # consumers first, so deleting the queues cancels nobody
    cleanup = await aio_pika.connect(url)
    channel = await cleanup.channel()
    for name in names:
        await channel.queue_delete(name)
    await cleanup.close()
    return envelopes / elapsed


async def main_async(args: argparse.Namespace) -> dict[str, object]:
    asya = await asya_runs(args.broker, args.envelopes, args.rate, args.light)
    single = await in_process(args.broker, args.envelopes)
    raw = await raw_aio_pika(args.broker, args.envelopes)
    return {
        "hops": len(HOPS),
        "envelopes": args.envelopes,
        "persistent": True,
        "confirms": True,
        "queue_type": "quorum",
        "asya_pods": asya,
        "asya_in_process_throughput_per_s": round(single, 1),
        "raw_aio_pika_throughput_per_s": round(raw, 1),
        "ratio_pods_to_raw_aio_pika": round(asya["throughput_per_s"] / raw, 3),
        "ratio_in_process_to_raw_aio_pika": round(single / raw, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--broker",
        default=os.environ.get("ASYA_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"),
    )
    parser.add_argument("--envelopes", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=50.0, help="light-load rate, per second")
    parser.add_argument("--light", type=int, default=200, help="envelopes at the light rate")
    args = parser.parse_args()
    # The same event loop for asya's side and the raw baseline (uvloop when installed).
    print(json.dumps(event_loop.run(main_async(args)), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
