"""`asya-sidecar`: one actor's queue, the runtime beside it, and nothing lost in between.

Reads its settings once (`ASYA_*`), connects to the broker (retrying with backoff, one line
per failure, no tracebacks), declares its queue and the end actors', and then either
- serves an actor: asks the runtime what it is (timeout, concurrency, retry policy all come
  from `@actor` through the runtime's Pong, with the frame protocol it speaks: this version's
  or the one before, `asya.runtime.protocols`), waiting for it as long as it takes, and runs
  the consumer chain with the runtime as its invoker; while the runtime is unreachable for
  longer than ASYA_RUNTIME_WAIT_S it stops consuming (see `runtime_link`); or
- serves `happy-end` / `error-end`: appends final envelopes to the namespace's results or
  failures stream (retention: ASYA_RECORDS_MAX_AGE, ASYA_RECORDS_MAX_BYTES), logs them and
  answers `reply_to`; a broker without streams stops it at start, exit 2.
SIGTERM or SIGINT, at any point: stop consuming, finish what is in flight within ASYA_GRACE_S,
give the rest back to the queue, exit 0. Health: /healthz and /readyz on ASYA_HEALTH_PORT, from
the start: live unless stopped, ready only while consuming with a runtime that answers; and
GET /metrics there too (`asya.metrics`; prometheus-client comes with the `rabbitmq` extra).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import random
import signal
import sys
from collections.abc import Awaitable, Sequence
from typing import Final, TypeVar

from asya import event_loop, logs, telemetry
from asya.clock import Clock, SystemClock
from asya.consumer import Consumer
from asya.crew.ends import EndActor
from asya.crew.sinks import LogSink
from asya.errors import AsyaError, SettingsError
from asya.gpu import read_inventory
from asya.health import HealthServer
from asya.hooks import combined
from asya.message_loop import LoopState, MessageLoop
from asya.metrics import Metrics
from asya.routing import END_ACTORS, ERROR_END, HAPPY_END
from asya.runtime.protocols import dialect_of
from asya.settings import (
    SIDECAR_VARIABLES,
    Settings,
    env_var,
    load_settings,
    variables_parser,
)
from asya.transport.connecting import connect_until_stopped

try:
    from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
except ImportError:  # reported by main(), without a traceback
    _missing_broker_client = True
else:
    _missing_broker_client = False
from asya_sidecar.events import StepEvents
from asya_sidecar.runtime_link import LinkState, RuntimeLink

log = logging.getLogger("asya.sidecar")

T = TypeVar("T")


async def connect_broker(
    settings: Settings, rng: random.Random, stop: asyncio.Event
) -> RabbitMQTransport | None:
    """Connect, retrying with backoff until it works; None if stopped first."""
    url = settings.transport.url
    if url is None:
        raise SettingsError(
            f"the sidecar needs a broker: set {env_var('broker_url')} or {env_var('broker_host')}",
            variable=env_var("broker_url"),
            value=None,
        )
    options = RabbitMQOptions.from_settings(
        settings.transport, connection_name=f"asya-sidecar-{settings.sidecar.actor}"
    )

    async def connect() -> RabbitMQTransport:
        transport = RabbitMQTransport(url, options)
        await transport.connect()
        return transport

    def say(line: str) -> None:
        print(f"asya-sidecar: {line}", file=sys.stderr, flush=True)

    return await connect_until_stopped(connect, stop=stop, rng=rng, say=say)


async def serve(settings: Settings, clock: Clock, rng: random.Random) -> None:
    """Run until SIGTERM or SIGINT; see the module docstring.

    Raises:
        AsyaError: the settings are wrong, or the runtime serves another actor.
    """
    actor = settings.sidecar.actor
    if not actor:
        raise SettingsError(
            f"{env_var('actor')} is not set: name the actor this sidecar serves",
            variable=env_var("actor"),
            value=None,
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    parts = _Parts()
    metrics = Metrics()
    # The pod's GPUs (those the kubelet gave it), read from NVML at each scrape; none without.
    metrics.watch_gpus(lambda: read_inventory().devices)
    # Up from the start: while the broker or the runtime is awaited, live but not ready.
    health = HealthServer(
        settings.sidecar.health_port,
        live=parts.is_live,
        ready=parts.is_ready,
        metrics=metrics.exposition if metrics.is_exposable else None,
    )
    if settings.sidecar.health_port:
        await health.start()
    try:
        transport = await connect_broker(settings, rng, stop)
        if transport is not None:
            await _serve_actor(actor, settings, transport, parts, stop, clock, rng, metrics)
    finally:
        await health.stop()


class _Parts:
    """What the probes and the runtime link's hooks look at, filled in as the sidecar starts."""

    def __init__(self) -> None:
        self.loop: MessageLoop | None = None
        self.runtime: RuntimeLink | None = None
        self.transport: RabbitMQTransport | None = None

    def is_live(self) -> bool:
        if self.runtime is not None and self.runtime.failed:
            return False  # the link to the runtime broke for good: only a restart mends it
        return self.loop is None or self.loop.state is not LoopState.STOPPED

    def is_ready(self) -> bool:
        # Not ready while publishing is impossible (the broker closed the publish channel, the
        # connection is down): consuming then would only send envelopes back to the queue.
        return (
            self.loop is not None
            and self.loop.state is LoopState.RUNNING
            and (self.runtime is None or self.runtime.is_available)
            and (self.transport is not None and self.transport.can_publish)
        )

    async def stop_consuming(self) -> None:
        """The runtime is down: let other replicas have the queue (messages held stay held)."""
        if self.loop is not None:
            await self.loop.pause()

    async def resume_consuming(self) -> None:
        if self.loop is not None:
            await self.loop.resume()


async def _serve_actor(
    actor: str,
    settings: Settings,
    transport: RabbitMQTransport,
    parts: _Parts,
    stop: asyncio.Event,
    clock: Clock,
    rng: random.Random,
    metrics: Metrics,
) -> None:
    """Serve `actor` on a connected broker until `stop`; closes the transport."""
    parts.transport = transport
    try:
        for name in {actor, HAPPY_END, ERROR_END}:
            await transport.declare(name)
        if actor not in END_ACTORS:
            parts.runtime = RuntimeLink(
                settings.runtime.socket_path,
                wait_s=settings.sidecar.runtime_wait_s,
                clock=clock,
                rng=rng,
                on_down=parts.stop_consuming,
                on_up=parts.resume_consuming,
                direct_depth=settings.process.pipeline_depth,
            )
            metrics.watch_runtime(actor, parts.runtime.is_up)
        # Waits for the runtime as long as it takes (the pod's probes bound that), or for stop.
        loop = await _unless_stopped(
            stop, _actor_loop(actor, settings, transport, parts.runtime, clock, rng, metrics)
        )
        if loop is None:
            return
        parts.loop = loop
        await loop.start()
        if parts.runtime is not None and parts.runtime.state is LinkState.DOWN:
            await parts.stop_consuming()  # it went down again before there was a loop to pause
        settle_heap()
        print(f"asya-sidecar: serving '{actor}'", file=sys.stderr, flush=True)
        await stop.wait()
        await _drain(loop, parts.runtime, settings.runtime.grace_s)
    finally:
        if parts.runtime is not None:
            await parts.runtime.aclose()
        await transport.aclose()


GC_FIRST_GENERATION: Final = 10_000
"""Allocations between two collections of the youngest generation (CPython's default: 700)."""


def settle_heap() -> None:
    """Keep the cycle collector's work to what serving makes, once startup is done.

    What startup made (modules, settings, the metrics registry, the loop) lives as long as the
    process: frozen, the collector never walks it again. What a message makes is freed by
    reference counts as soon as it is settled; a larger youngest generation collects the
    little that is left in fewer passes, each of which walks every message in flight. Measured
    (perf, a saturated three-hop run): the collector took 3.7% of a sidecar's CPU before, and
    no sample in 12 s after. No user code runs in this process: no cycle but ours waits longer
    to be freed. Startup's garbage is collected first, not frozen. What is frozen and later let
    go (the first runtime connection, if the runtime restarts) is still freed by reference
    counts; only a cycle in it would be kept, once, not per restart.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_FIRST_GENERATION, *gc.get_threshold()[1:])


async def _drain(loop: MessageLoop, runtime: RuntimeLink | None, grace_s: float) -> None:
    """Drain `loop` for up to `grace_s`; cut short once the runtime is unreachable: a pod being
    stopped gets no runtime back, so the calls waiting for it would only wait out the grace
    (the pod's, which covers the actor's timeout), their envelopes held all that time."""
    draining = asyncio.ensure_future(loop.stop(grace_s))
    if runtime is not None:
        gone = asyncio.ensure_future(runtime.unreachable())
        await asyncio.wait({draining, gone}, return_when=asyncio.FIRST_COMPLETED)
        if gone.done() and not draining.done():
            log.warning("runtime gone while draining; calls in flight go back to the queue")
            loop.cut_short()
        gone.cancel()
    await draining


async def _unless_stopped(stop: asyncio.Event, work: Awaitable[T]) -> T | None:
    """What `work` returns, or None (and `work` cancelled) if `stop` is set first."""
    working = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({working, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        working.cancel()
        await asyncio.gather(working, stopping, return_exceptions=True)
    if stop.is_set():
        return None
    return working.result()


async def _actor_loop(
    actor: str,
    settings: Settings,
    transport: RabbitMQTransport,
    runtime: RuntimeLink | None,
    clock: Clock,
    rng: random.Random,
    metrics: Metrics,
) -> MessageLoop:
    """The loop of an end actor (its records declared), or of the consumer chain for the actor
    the runtime says it serves; not started. The runtime link, its invoker, is the caller's to
    close.

    Raises:
        AsyaError: the runtime serves another actor than this sidecar's.
        SettingsError: an end actor's broker cannot keep its records.
    """
    if runtime is None:
        end = EndActor(
            actor, transport=transport, sink=LogSink(), clock=clock, rng=rng, metrics=metrics
        )
        await end.declare()
        return end.loop
    pong = await runtime.ping()
    info = pong.actor
    if info.name != actor:
        raise AsyaError(
            f"the runtime serves actor '{info.name}' but this sidecar is for '{actor}':"
            f" check {env_var('actor')} and {env_var('handler')}"
        )
    hooks = combined(
        StepEvents(emit=settings.sidecar.step_events),
        tracing=telemetry.installed(),
        metrics=metrics,
    )
    consumer = Consumer(
        info,
        transport=transport,
        invoker=runtime,
        limits=settings.limits,
        clock=clock,
        rng=rng,
        hooks=hooks,
        outputs_checked=True,  # the runtime's workers check each output before sending it
    )
    # A runtime of the protocol before this one cannot be drained: it is sent no calls to queue.
    depth = dialect_of(pong.protocol).pipeline_depth(settings.process.pipeline_depth)
    return MessageLoop.for_actor(transport, info, consumer, depth=depth, hooks=hooks)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `asya-sidecar` console script (no arguments but --help)."""
    variables_parser(
        "asya-sidecar",
        "One actor's queue beside its runtime: consume, call the runtime, route, publish, ack.",
        SIDECAR_VARIABLES,
    ).parse_args(argv)
    if _missing_broker_client:
        print(
            "asya-sidecar: the RabbitMQ client is missing: pip install 'asya[rabbitmq]'",
            file=sys.stderr,
        )
        return 2
    try:
        settings = load_settings(os.environ)
        logs.configure(settings.process)
        telemetry.start_tracing(settings.tracing, service_name="asya-sidecar")
        main_loop = serve(settings, SystemClock(), random.Random())
        event_loop.run(main_loop, settings.process.event_loop)
    except AsyaError as exc:
        print(f"asya-sidecar: {exc}", file=sys.stderr)
        return 2
    finally:
        telemetry.stop_tracing()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
