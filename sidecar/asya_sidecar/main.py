"""`asya-sidecar`: one actor's queue, the runtime beside it, and nothing lost in between.

Reads its settings once (`ASYA_*`), connects to the broker (retrying with backoff, one line
per failure, no tracebacks), declares its queue and the end actors', and then either
- serves an actor: asks the runtime what it is (timeout, concurrency, retry policy all come
  from `@actor` through the runtime's Pong), and runs the consumer chain with the runtime as
  its invoker; or
- serves `happy-end` / `error-end`: records final envelopes and answers `reply_to`.
SIGTERM or SIGINT: stop consuming, finish what is in flight within ASYA_GRACE_S, give the
rest back to the queue, exit 0. Health: /healthz and /readyz on ASYA_HEALTH_PORT.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import sys
from collections.abc import Sequence

from asya import event_loop, logs
from asya.clock import Clock, SystemClock
from asya.consumer import Consumer, ConsumerConfig
from asya.crew.ends import EndActor
from asya.errors import AsyaError, SettingsError, TransportError
from asya.retry import RetryPolicy, backoff_ms
from asya.routing import END_ACTORS, ERROR_END, HAPPY_END
from asya.runtime.frames import ActorInfo
from asya.settings import (
    SIDECAR_VARIABLES,
    Settings,
    env_var,
    format_settings_help,
    load_settings,
)

try:
    from asya.transport.rabbitmq import QueueType, RabbitMQOptions, RabbitMQTransport
except ImportError:  # reported by main(), without a traceback
    _missing_broker_client = True
else:
    _missing_broker_client = False
from asya_sidecar.events import LogSink, StepEvents
from asya_sidecar.health import HealthServer
from asya_sidecar.runtime_link import RuntimeLink

log = logging.getLogger("asya.sidecar")

BROKER_BACKOFF = RetryPolicy(base_delay_ms=500, factor=2.0, max_delay_ms=30_000, jitter=0.2)
"""Backoff between attempts to reach the broker at start."""


def consumer_config(info: ActorInfo) -> ConsumerConfig:
    """The chain's configuration from what the runtime says about its actor."""
    return ConsumerConfig(
        actor=info.name,
        retry=RetryPolicy(
            max_attempts=info.max_attempts,
            base_delay_ms=info.base_delay_ms,
            factor=info.factor,
            max_delay_ms=info.max_delay_ms,
            jitter=info.jitter,
            retry_timeouts=info.retry_timeouts,
        ),
        concurrency=info.concurrency,
        batch=info.batch,
        batch_wait_ms=info.batch_wait_ms,
    )


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
    options = RabbitMQOptions(
        namespace=settings.transport.namespace,
        queue_type=QueueType(settings.transport.queue_type),
        delivery_limit=settings.transport.delivery_limit,
        connection_name=f"asya-sidecar-{settings.sidecar.actor}",
    )
    attempt = 1
    while True:
        transport = RabbitMQTransport(url, options)
        try:
            await transport.connect()
            return transport
        except TransportError as exc:
            delay = backoff_ms(BROKER_BACKOFF, attempt, rng) / 1000
            print(f"asya-sidecar: {exc}; retrying in {delay:.1f} s", file=sys.stderr, flush=True)
            try:
                await asyncio.wait_for(stop.wait(), delay)
                return None
            except TimeoutError:
                attempt += 1


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
    transport = await connect_broker(settings, rng, stop)
    if transport is None:
        return
    runtime: RuntimeLink | None = None
    try:
        for name in {actor, HAPPY_END, ERROR_END}:
            await transport.declare(name)
        if actor not in END_ACTORS:
            runtime = RuntimeLink(
                settings.runtime.socket_path,
                wait_s=settings.sidecar.runtime_wait_s,
                clock=clock,
                rng=rng,
            )
        role = await _role(actor, settings, transport, runtime, clock, rng)
        link = runtime
        health = HealthServer(
            settings.sidecar.health_port,
            live=lambda: role.loop.state.value in ("starting", "running", "draining"),
            ready=lambda: role.loop.state.value == "running" and (link is None or link.connected),
        )
        if settings.sidecar.health_port:
            await health.start()
        await role.start()
        print(f"asya-sidecar: serving '{actor}'", file=sys.stderr, flush=True)
        await stop.wait()
        await role.stop(settings.runtime.grace_s)
        if settings.sidecar.health_port:
            await health.stop()
    finally:
        if runtime is not None:
            await runtime.aclose()
        await transport.aclose()


async def _role(
    actor: str,
    settings: Settings,
    transport: RabbitMQTransport,
    runtime: RuntimeLink | None,
    clock: Clock,
    rng: random.Random,
) -> Consumer | EndActor:
    """An end actor, or the consumer chain for the actor the runtime says it serves.

    Raises:
        AsyaError: the runtime serves another actor than this sidecar's.
    """
    if runtime is None:
        return EndActor(actor, transport=transport, sink=LogSink(), clock=clock, rng=rng)
    info = (await runtime.ping()).actor
    if info.name != actor:
        raise AsyaError(
            f"the runtime serves actor '{info.name}' but this sidecar is for '{actor}':"
            f" check {env_var('actor')} and {env_var('handler')}"
        )
    return Consumer(
        consumer_config(info),
        transport=transport,
        invoker=runtime,
        limits=settings.limits,
        clock=clock,
        rng=rng,
        observer=StepEvents(emit=settings.sidecar.step_events),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `asya-sidecar` console script (no arguments but --help)."""
    usage = "usage: asya-sidecar [-h]"
    if argv is None:
        argv = sys.argv[1:]
    if list(argv) in (["-h"], ["--help"]):
        print(
            f"{usage}\n\nOne actor's queue beside its runtime: consume, call the runtime, route,"
            " publish, ack.\nTakes no arguments; configured by these environment variables"
            f" (defaults shown):\n\n{format_settings_help(SIDECAR_VARIABLES)}"
        )
        return 0
    if argv:
        print(f"{usage}\nasya-sidecar: takes no arguments, got {' '.join(argv)}", file=sys.stderr)
        return 2
    if _missing_broker_client:
        print(
            "asya-sidecar: the RabbitMQ client is missing: pip install 'asya[rabbitmq]'",
            file=sys.stderr,
        )
        return 2
    try:
        settings = load_settings(os.environ)
        logs.configure(settings.process)
        main_loop = serve(settings, SystemClock(), random.Random())
        event_loop.run(main_loop, settings.process.event_loop)
    except AsyaError as exc:
        print(f"asya-sidecar: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
