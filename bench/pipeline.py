"""Pipeline throughput and latency: 3 hops through real sidecar and runtime processes.

    python bench/pipeline.py [--broker URL] [--envelopes 3000] [--rate 50] [--light 200]
                             [--queue-type quorum|classic] [--repeat 1]

Starts three actors as pods (a `python -m asya.runtime` and an `asya-sidecar` process each)
on the broker, in a namespace of its own, and measures with persistent messages and
publisher confirms on:
- saturation: publish `--envelopes` at once, time until the last reaches happy-end;
- latency: send `--light` envelopes at `--rate` per second, end-to-end p50 and p99;
- the same saturation run with all three actors in this one process (`asya dev --broker`:
  the same consumer chain and guarantees, handlers called in-process), which is the shape
  of Dramatiq's and Celery's workers;
- the same saturation run through a plain aio-pika 3-hop pipeline (consume, publish with
  confirm, ack — what any correct consumer must do), for a ratio on the same broker;
- the same through Dramatiq (if installed: `pip install 'asya[bench]'`): its own worker
  (2 processes, 8 threads, the defaults on this machine) with publisher confirms on, each
  actor sending to the next; Dramatiq declares classic queues.
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
from asya.transport.rabbitmq import QueueType, RabbitMQOptions, RabbitMQTransport

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


async def start_pods(
    url: str, namespace: str, workdir: Path, queue_type: str = "quorum"
) -> list[asyncio.subprocess.Process]:
    (workdir / "bench_handlers.py").write_text(HANDLERS)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(workdir), os.environ.get("PYTHONPATH", "")]),
        "ASYA_BROKER_URL": url,
        "ASYA_NAMESPACE": namespace,
        "ASYA_HEALTH_PORT": "0",
        "ASYA_QUEUE_TYPE": queue_type,
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


async def asya_runs(
    url: str, envelopes: int, rate: float, light: int, queue_type: str
) -> dict[str, float]:
    namespace = f"bench-{secrets.token_hex(4)}"
    options = RabbitMQOptions(
        namespace=namespace, connection_name="bench", queue_type=QueueType(queue_type)
    )
    transport = RabbitMQTransport(url, options)
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
        processes = await start_pods(url, namespace, Path(workdir), queue_type)
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


async def in_process(url: str, envelopes: int, queue_type: str) -> float:
    """Envelopes per second with the three actors in this process, on the broker."""
    for name in HOPS:
        if REGISTRY.get(name) is None:
            actor(name=name, concurrency=16)(_hop)
    app = App(specs=tuple(REGISTRY), route=HOPS, search_path=None)
    options = RabbitMQOptions(
        namespace=f"bench-{secrets.token_hex(4)}",
        connection_name="bench",
        queue_type=QueueType(queue_type),
    )
    transport = RabbitMQTransport(url, options)
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


async def raw_aio_pika(url: str, envelopes: int, queue_type: str) -> float:
    """Envelopes per second through 3 plain consumer -> publish(confirm) -> ack hops."""
    prefix = f"bench-raw-{secrets.token_hex(4)}"
    connection = await aio_pika.connect_robust(url)
    names = [f"{prefix}-{i}" for i in range(4)]
    done = asyncio.Event()
    count = 0
    setup = await connection.channel()
    for name in names:
        await setup.declare_queue(name, durable=True, arguments={"x-queue-type": queue_type})

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


DRAMATIQ_PIPELINE = textwrap.dedent(
    """
    import os
    import dramatiq
    from dramatiq.brokers.rabbitmq import RabbitmqBroker

    PREFIX = os.environ["BENCH_PREFIX"]
    dramatiq.set_broker(RabbitmqBroker(url=os.environ["BENCH_URL"], confirm_delivery=True))

    @dramatiq.actor(queue_name=PREFIX + "-sink", max_retries=0)
    def sink(doc):
        pass

    @dramatiq.actor(queue_name=PREFIX + "-c", max_retries=0)
    def hop_c(doc):
        sink.send({**doc, "c": 1})

    @dramatiq.actor(queue_name=PREFIX + "-b", max_retries=0)
    def hop_b(doc):
        hop_c.send({**doc, "b": 1})

    @dramatiq.actor(queue_name=PREFIX + "-a", max_retries=0)
    def hop_a(doc):
        hop_b.send({**doc, "a": 1})
    """
)


async def dramatiq_pipeline(url: str, envelopes: int) -> float | None:
    """Envelopes per second through 3 Dramatiq actors; None when Dramatiq is not installed."""
    try:
        import dramatiq  # optional: only this baseline needs it
    except ImportError:
        return None
    prefix = f"bench-dq-{secrets.token_hex(4)}"
    queues = [f"{prefix}-{q}" for q in ("a", "b", "c", "sink")]
    connection = await aio_pika.connect_robust(url)
    channel = await connection.channel(publisher_confirms=True)
    for name in queues:  # as Dramatiq declares them, so its worker finds them as it expects
        await channel.declare_queue(
            name,
            durable=True,
            arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": f"{name}.XQ"},
        )
    with tempfile.TemporaryDirectory(prefix="asya-bench-dq-") as workdir:
        (Path(workdir) / "bench_dramatiq.py").write_text(DRAMATIQ_PIPELINE)
        env = {
            **os.environ,
            "BENCH_PREFIX": prefix,
            "BENCH_URL": url,
            "PYTHONPATH": os.pathsep.join([workdir, os.environ.get("PYTHONPATH", "")]),
        }
        worker = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "dramatiq",
            "bench_dramatiq",
            "--processes",
            "2",
            "--threads",
            "8",
            "--queues",
            *queues[:3],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        arrived = 0
        done = asyncio.Event()

        async def count(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            nonlocal arrived
            await message.ack()
            arrived += 1
            if arrived >= envelopes:
                done.set()

        sink = await connection.channel()
        await sink.set_qos(prefetch_count=64)
        await (await sink.get_queue(queues[3])).consume(count)
        try:
            bodies = [
                dramatiq.Message(
                    queue_name=queues[0],
                    actor_name="hop_a",
                    args=({"n": n},),
                    kwargs={},
                    options={},
                ).encode()
                for n in range(envelopes)
            ]
            await asyncio.sleep(3)  # let the worker boot and start consuming
            started = time.perf_counter()
            await asyncio.gather(
                *(
                    channel.default_exchange.publish(
                        aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                        routing_key=queues[0],
                    )
                    for body in bodies
                )
            )
            await asyncio.wait_for(done.wait(), 600)
            elapsed = time.perf_counter() - started
        finally:
            worker.terminate()
            await worker.wait()
            await connection.close()
            cleanup = await aio_pika.connect(url)
            drop = await cleanup.channel()
            for name in queues:
                for suffix in ("", ".DQ", ".XQ"):
                    await drop.queue_delete(name + suffix)
            await cleanup.close()
    return envelopes / elapsed


async def main_async(args: argparse.Namespace) -> dict[str, object]:
    # Best of --repeat for each pipeline: the machine's other load only ever slows a run.
    runs = [
        await asya_runs(args.broker, args.envelopes, args.rate, args.light, args.queue_type)
        for _ in range(args.repeat)
    ]
    asya = max(runs, key=lambda r: r["throughput_per_s"])
    single = max(
        [await in_process(args.broker, args.envelopes, args.queue_type) for _ in range(args.repeat)]
    )
    raw = max(
        [
            await raw_aio_pika(args.broker, args.envelopes, args.queue_type)
            for _ in range(args.repeat)
        ]
    )
    attempts = [await dramatiq_pipeline(args.broker, args.envelopes) for _ in range(args.repeat)]
    dramatiq = None if None in attempts else max(a for a in attempts if a is not None)
    peers: dict[str, object] = {}
    if dramatiq is not None:
        peers = {
            "dramatiq_throughput_per_s": round(dramatiq, 1),
            "ratio_pods_to_dramatiq": round(asya["throughput_per_s"] / dramatiq, 3),
            "ratio_in_process_to_dramatiq": round(single / dramatiq, 3),
        }
    return {
        "hops": len(HOPS),
        "envelopes": args.envelopes,
        "persistent": True,
        "confirms": True,
        "queue_type": args.queue_type,
        "repeat": args.repeat,
        "asya_pods": asya,
        "asya_in_process_throughput_per_s": round(single, 1),
        "raw_aio_pika_throughput_per_s": round(raw, 1),
        "ratio_pods_to_raw_aio_pika": round(asya["throughput_per_s"] / raw, 3),
        "ratio_in_process_to_raw_aio_pika": round(single / raw, 3),
        **peers,
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
    parser.add_argument(
        "--queue-type",
        choices=["quorum", "classic"],
        default="quorum",
        help="asya's queues (Dramatiq always uses classic ones)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each; the best counts")
    args = parser.parse_args()
    # The same event loop for asya's side and the raw baseline (uvloop when installed).
    print(json.dumps(event_loop.run(main_async(args)), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
