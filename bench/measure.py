"""One contender, measured: the procedure every contender goes through, step for step the same.

1. `start` the contender (queues declared, processes started).
2. Warm-up: `warmup` messages published at once through the shared publisher and awaited at
   the shared sink. This is also how the run knows the contender is ready: no sleeps.
3. Saturation: `count` messages built first, then the clock starts at the first publish and
   stops at the sink's last arrival; all are published at once, so every hop has a backlog.
   CPU of each role (the broker's Erlang VM, each of the contender's processes, the benchmark's
   own process) is read before and after; peak RSS (VmHWM) after.
4. Light rates: at each rate, `light_count` messages published on a fixed schedule, each stamped
   just before its publish; latency is its arrival at the sink minus its stamp.
5. Delivery: every message of every phase must arrive exactly once; what is missing, failed,
   duplicated or unreadable is reported.
6. `stop`: every process stopped (SIGKILL counted when needed), every queue deleted.
"""

from __future__ import annotations

import asyncio
import math
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aio_pika.abc import AbstractRobustConnection

from bench.contenders.base import Contender
from bench.procs import cpu_between, cpu_seconds
from bench.traffic import Publisher, Sink, payload

WARMUP = "warmup"
SATURATION = "saturation"


@dataclass(frozen=True)
class Plan:
    count: int
    """Messages in the saturation batch."""
    warmup: int
    rates: tuple[float, ...]
    """Light rates, messages per second."""
    light_count: int
    """Messages at each light rate."""
    payload_bytes: int
    timeout_s: float
    """Longest wait for one phase's messages before the contender is declared failed."""


class ContenderFailedError(Exception):
    """A contender's process died, or its messages did not all arrive in time."""


async def measure(
    contender: Contender,
    plan: Plan,
    connection: AbstractRobustConnection,
    broker_pid: int | None,
) -> dict[str, Any]:
    """Run the procedure of the module docstring; the contender's results as JSON."""
    pad = "x" * plan.payload_bytes
    result: dict[str, Any] = {"contender": contender.name}
    try:
        await contender.start()
        sink = await Sink.open(connection, contender.wire)
        publisher = await Publisher.open(connection, contender.wire)
        try:
            sent = await _run_phases(contender, plan, sink, publisher, broker_pid, pad, result)
        finally:
            await publisher.close()
            await sink.close()
        result["delivery"] = _delivery(sink, sent)
    finally:
        result["stopped_by_sigkill"] = await contender.stop()
        result["notes"] = list(contender.notes)
    return result


async def _run_phases(
    contender: Contender,
    plan: Plan,
    sink: Sink,
    publisher: Publisher,
    broker_pid: int | None,
    pad: str,
    result: dict[str, Any],
) -> dict[str, int]:
    wire = contender.wire
    await publisher.publish_all([wire.wrap(payload(WARMUP, i, pad)) for i in range(plan.warmup)])
    await _await_phase(contender, sink, WARMUP, plan.warmup, plan.timeout_s)

    batch = [wire.wrap(payload(SATURATION, i, pad)) for i in range(plan.count)]
    before = contender.processes.usage()
    broker_before, bench_before = cpu_seconds(broker_pid or -1), cpu_seconds(os.getpid())
    started = time.perf_counter()
    await publisher.publish_all(batch)
    await _await_phase(contender, sink, SATURATION, plan.count, plan.timeout_s)
    elapsed = max(a.at for a in sink.of(SATURATION)) - started
    after = contender.processes.usage()
    broker_after, bench_after = cpu_seconds(broker_pid or -1), cpu_seconds(os.getpid())

    cpu = cpu_between(before, after)
    if broker_before is not None and broker_after is not None:
        cpu["broker"] = round(broker_after - broker_before, 3)
    if bench_before is not None and bench_after is not None:
        cpu["bench"] = round(bench_after - bench_before, 3)
    result["saturation"] = {
        "messages": plan.count,
        "seconds": round(elapsed, 3),
        "per_s": round(plan.count / elapsed, 1),
    }
    result["cpu_s"] = cpu
    result["cpu_ms_per_message"] = {
        role: round(seconds * 1000 / plan.count, 3) for role, seconds in cpu.items()
    }
    result["peak_rss_mib"] = after.peak_rss_mib

    sent = {WARMUP: plan.warmup, SATURATION: plan.count}
    result["light"] = []
    for rate in plan.rates:
        phase = f"rate-{rate:g}"
        await _paced(publisher, phase, plan.light_count, rate, pad)
        await _await_phase(contender, sink, phase, plan.light_count, plan.timeout_s)
        sent[phase] = plan.light_count
        latencies = sorted((a.at - a.t0) * 1000 for a in sink.of(phase))
        result["light"].append(
            {"rate_per_s": rate, "messages": plan.light_count, **_spread(latencies)}
        )
    return sent


async def _await_phase(
    contender: Contender, sink: Sink, phase: str, count: int, timeout_s: float
) -> None:
    """Until every message of `phase` arrived; fails early if a contender's process exits."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            await sink.wait_for(phase, count, min(1.0, max(0.0, deadline - time.monotonic())))
        except TimeoutError:
            pass
        else:
            return
        exited = contender.processes.exited()
        if exited or time.monotonic() >= deadline:
            why = "a process exited" if exited else f"not all arrived within {timeout_s:g} s"
            raise ContenderFailedError(
                f"{contender.name}: {phase}: {sink.count(phase)} of {count} arrived; {why}\n"
                + contender.processes.tails()
            )


async def _paced(publisher: Publisher, phase: str, count: int, rate: float, pad: str) -> None:
    """Publish `count` messages at `rate` per second, on a schedule fixed from the start (a
    slow publish does not push the later ones back), each stamped just before its publish."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with asyncio.TaskGroup() as group:
        for seq in range(count):
            delay = start + seq / rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            group.create_task(publisher.publish_stamped(phase, seq, pad))


def _spread(latencies_ms: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(latencies_ms), 2),
        "p99_ms": round(percentile(latencies_ms, 99), 2),
        "max_ms": round(latencies_ms[-1], 2),
    }


def percentile(ordered: Sequence[float], p: float) -> float:
    """The nearest-rank percentile of sorted values."""
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def _delivery(sink: Sink, sent: dict[str, int]) -> dict[str, int]:
    missing = sum(len(sink.missing(phase, count)) for phase, count in sent.items())
    return {
        "sent": sum(sent.values()),
        "arrived": len(sink.arrived),
        "failed": len(sink.failed),
        "missing": missing,
        "duplicates": sink.duplicates,
        "unreadable": sink.unreadable,
    }
