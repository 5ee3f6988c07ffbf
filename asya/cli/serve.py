"""`asya serve`: run an app's actors as long-lived consumers on a broker, in one process.

The service itself is `asya.local.serve`; this module reads the arguments, installs the signal
handlers (SIGTERM and SIGINT both stop it cleanly), serves the probes and maps the outcome to
an exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import sys
from typing import TYPE_CHECKING

from asya import event_loop, telemetry
from asya.cli.options import (
    EXIT_FAILURES,
    EXIT_OK,
    EXIT_USAGE,
    add_broker,
    add_limits,
    broker_transport,
    limits,
    port,
    positive_int,
    route,
    seconds,
)
from asya.clock import SystemClock
from asya.errors import TransportError
from asya.health import HealthServer
from asya.local.discovery import load_app
from asya.local.mesh import MeshOptions, SyncHost
from asya.local.serve import ServeOptions, Service, select_actors
from asya.settings import Settings, env_var

if TYPE_CHECKING:
    from asya.cli.options import Subparsers
    from asya.transport.base import Transport


def add_parser(commands: Subparsers) -> None:
    serve = commands.add_parser(
        "serve",
        help="run an app's actors on a broker until stopped (a VM, docker compose)",
        description=(
            "Consume APP's actors' queues on the broker, each scaled by its queue depth as in"
            " asya dev, plus happy-end and error-end (unless --no-ends), until SIGTERM or"
            " SIGINT. Several processes may serve the same namespace: they are competing"
            " consumers. A broker that cannot be reached at start is retried with backoff, one"
            " line per attempt. On SIGTERM or SIGINT: stop consuming, let in-flight work finish"
            f" within {env_var('grace_s')} seconds, give the rest back to the queues. Queues"
            " are never deleted. Exit code: 0 after a stop on SIGTERM or SIGINT; 1 if the broker"
            " failed while serving (restart it: nothing is lost, unsettled messages go back to"
            " their queues); 2 for a usage error, an app that cannot be imported or an actor"
            " that cannot start."
        ),
    )
    serve.add_argument("app", metavar="APP", help="a folder, a .py file or a module name")
    serve.add_argument(
        "--actors",
        type=route,
        metavar="A,B",
        help="serve only these of the app's actors (default: all)",
    )
    serve.add_argument(
        "--no-ends",
        dest="ends",
        action="store_false",
        help="do not run happy-end and error-end here (another process does)",
    )
    serve.add_argument(
        "--health-port",
        type=port,
        metavar="N",
        help="answer /healthz, /readyz, /status (for asya status --from) and /metrics on this port"
        " (0 picks a free one; default: none)",
    )
    serve.add_argument(
        "--status-every",
        type=seconds,
        default=30.0,
        metavar="S",
        help="seconds between status lines on stderr (30; 0 for none)",
    )
    serve.add_argument(
        "--poll-ms",
        type=positive_int,
        default=500,
        metavar="MS",
        help="queue-depth poll interval for scaling (500)",
    )
    add_limits(serve)
    add_broker(serve, default_help="ASYA_BROKER_URL")
    serve.set_defaults(run=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """`asya serve`; see the parser's description for what it does and its exit codes.

    Raises:
        ActorDefinitionError: the app cannot be imported or an actor cannot start.
        SettingsError: --actors names an actor the app does not define.
    """
    url = args.broker or settings.transport.url
    if url is None:
        print("asya: pass --broker URL (or set ASYA_BROKER_URL)", file=sys.stderr)
        return EXIT_USAGE
    specs = select_actors(load_app(args.app).specs, args.actors)
    namespace = args.namespace or settings.transport.namespace

    async def connect() -> Transport:
        transport = broker_transport(url, namespace, settings, name="asya-serve")
        await transport.connect()
        return transport

    service = Service(
        specs,
        connect=connect,
        say=_say,
        clock=SystemClock(),
        rng=random.Random(),
        options=ServeOptions(
            mesh=MeshOptions(
                limits=limits(args, settings),
                poll_interval_s=args.poll_ms / 1000,
                grace_s=settings.runtime.grace_s,
                depth=settings.process.pipeline_depth,
                host=SyncHost.WORKER_PROCESSES,
            ),
            ends=args.ends,
            status_every_s=args.status_every,
        ),
    )
    telemetry.start_tracing(settings.tracing, service_name="asya-serve")
    try:
        event_loop.run(_serve(service, args.health_port), settings.process.event_loop)
    except TransportError as exc:
        print(f"asya: the broker failed while serving: {exc}", file=sys.stderr)
        return EXIT_FAILURES
    finally:
        telemetry.stop_tracing()
    return EXIT_OK


async def _serve(service: Service, health_port: int | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    # Up before the broker is reached: live but not ready while it is awaited.
    health = health_server(service, health_port or 0)
    if health_port is not None:
        await health.start()
        _say(f"asya: probes on port {health.port} (/healthz, /readyz, /status, /metrics)")
    try:
        await service.run(stop)
    finally:
        await health.stop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def health_server(service: Service, port: int) -> HealthServer:
    """What `--health-port` serves: probes, `/status` and the instruments' `/metrics`."""
    return HealthServer(
        port,
        live=service.is_live,
        ready=service.is_ready,
        status=service.status_json,
        metrics=service.metrics.exposition if service.metrics.is_exposable else None,
    )


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
