"""`asya dev`: run an app's actors over a file of inputs (in-memory, on a broker, or isolated)."""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from asya import event_loop
from asya.cli.options import (
    EXIT_FAILURES,
    EXIT_OK,
    EXIT_USAGE,
    add_broker,
    add_limits,
    add_route,
    broker_transport,
    fresh_namespace,
    limits,
    write_line,
)
from asya.clock import SystemClock
from asya.envelope import Envelope
from asya.local.discovery import App, load_app
from asya.local.isolate import IsolatedMesh
from asya.local.mesh import MeshOptions
from asya.local.report import RunStats, format_summary
from asya.local.runner import DevOptions, DevResult, MeshFactory, run_dev
from asya.routing import ERROR_END, HAPPY_END
from asya.settings import Settings

if TYPE_CHECKING:
    from asya.cli.options import Subparsers
    from asya.transport.rabbitmq import RabbitMQTransport


def add_parser(commands: Subparsers) -> None:
    dev = commands.add_parser(
        "dev",
        help="run an app's actors locally over a file of inputs",
        description=(
            "Start every actor found in APP, scale each by its queue depth, feed the inputs,"
            " print each final envelope as a JSON line on stdout and a summary per actor on"
            " stderr. A line of INPUT is a bare payload (sent along --route or the app's"
            " ROUTE) or a whole envelope with its own route. In-memory by default; --broker"
            " runs the same actors in-process against RabbitMQ; --isolate also runs each actor"
            " as a runtime process plus a sidecar process, exactly as in a pod."
        ),
    )
    dev.add_argument("app", metavar="APP", help="a folder, a .py file or a module name")
    dev.add_argument("--input", required=True, type=Path, help="JSON Lines file of inputs")
    add_route(dev, "route for bare payloads (default: the app's ROUTE)")
    dev.add_argument("--output", type=Path, help="also write final envelopes to this file")
    dev.add_argument(
        "--allow-failures", action="store_true", help="exit 0 even if some envelopes failed"
    )
    dev.add_argument("--quiet", action="store_true", help="no progress lines, no summary")
    add_limits(dev)
    dev.add_argument(
        "--poll-ms", type=int, default=50, help="queue-depth poll interval for scaling (50)"
    )
    add_broker(dev, default_help="in-memory")
    dev.add_argument(
        "--isolate",
        action="store_true",
        help="one runtime process and one sidecar process per actor (needs --broker)",
    )
    dev.set_defaults(run=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    app = load_app(args.app)
    try:
        lines = args.input.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        print(f"asya: cannot read --input: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.isolate and not args.broker:
        print("asya: --isolate needs --broker amqp://...", file=sys.stderr)
        return EXIT_USAGE
    if not (args.route or app.route):
        print(
            "asya: no route for bare payloads: pass --route a,b,c or declare ROUTE in the app"
            " (lines that are whole envelopes carry their own)",
            file=sys.stderr,
        )
    output = args.output.open("w", encoding="utf-8") if args.output else None

    async def emit(envelope: Envelope) -> None:
        write_line(sys.stdout, envelope)
        if output is not None:
            write_line(output, envelope)

    try:
        main = _run(args, settings, app, lines, emit)
        result = event_loop.run(main, settings.process.event_loop)
    finally:
        if output is not None:
            output.close()
    if not args.quiet:
        route = list(app.route or ())
        order = route + [s.name for s in app.specs if s.name not in route]
        print("\n" + format_summary(result.stats, order, result.elapsed_s), file=sys.stderr)
    if result.stats.failed and not args.allow_failures:
        return EXIT_FAILURES
    return EXIT_OK


async def _run(
    args: argparse.Namespace,
    settings: Settings,
    app: App,
    lines: list[str],
    emit: Callable[[Envelope], Awaitable[None]],
) -> DevResult:
    clock, rng = SystemClock(), random.Random()
    options = DevOptions(
        route=args.route,
        mesh=MeshOptions(limits=limits(args, settings), poll_interval_s=args.poll_ms / 1000),
    )

    def progress(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    if not args.broker:
        return await run_dev(
            app, lines, emit=emit, progress=progress, clock=clock, rng=rng, options=options
        )
    namespace = args.namespace or fresh_namespace()
    transport = broker_transport(args.broker, namespace, settings, name="asya-dev")
    await transport.connect()
    try:
        with tempfile.TemporaryDirectory(prefix="asya-dev-") as workdir:
            mesh = None
            if args.isolate:
                mesh = _isolated(app, transport, args.broker, namespace, Path(workdir), clock, rng)
            return await run_dev(
                app,
                lines,
                emit=emit,
                progress=progress,
                clock=clock,
                rng=rng,
                options=options,
                transport=transport,
                mesh=mesh,
            )
    finally:
        if not args.namespace:  # a namespace made for this run leaves nothing behind
            await transport.delete_queues([*(s.name for s in app.specs), HAPPY_END, ERROR_END])
        await transport.aclose()


def _isolated(
    app: App,
    transport: RabbitMQTransport,
    url: str,
    namespace: str,
    workdir: Path,
    clock: SystemClock,
    rng: random.Random,
) -> MeshFactory:
    def start(stats: RunStats) -> IsolatedMesh:
        return IsolatedMesh(
            app,
            transport=transport,
            broker_url=url,
            namespace=namespace,
            observer=stats,
            sink=stats,
            workdir=workdir,
            env=dict(os.environ),
            clock=clock,
            rng=rng,
        )

    return start
