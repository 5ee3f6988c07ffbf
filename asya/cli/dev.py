"""`asya dev`: run an app's actors over a file of inputs (in-memory, on a broker, or isolated).

stdout carries the finals and nothing else: from loading the app to the summary, whatever the
process or its children write to stdout goes to stderr (`asya.cli.finals`).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import random
import signal
import sys
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from asya import event_loop, telemetry
from asya.cli.finals import FinalsWriter, stdout_to_stderr
from asya.cli.options import (
    EXIT_FAILURES,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    add_broker,
    add_limits,
    add_route,
    broker_transport,
    fresh_namespace,
    limits,
    positive_int,
)
from asya.clock import SystemClock
from asya.local.discovery import App, load_app
from asya.local.gpus import GpuMode
from asya.local.isolate import IsolatedMesh
from asya.local.mesh import MeshOptions
from asya.local.report import RunStats, format_summary
from asya.local.runner import DevOptions, DevResult, MeshFactory, RunPlan, check_run, run_dev
from asya.routing import ERROR_END, HAPPY_END
from asya.settings import Settings

if TYPE_CHECKING:
    from asya.cli.options import Subparsers
    from asya.transport.rabbitmq import RabbitMQTransport

T = TypeVar("T")


def add_parser(commands: Subparsers) -> None:
    dev = commands.add_parser(
        "dev",
        help="run an app's actors locally over a file of inputs",
        description=(
            "Start every actor of APP that the inputs can reach, scale each by its queue depth,"
            " feed the inputs, print each final envelope as a JSON line on stdout and a"
            " summary per actor on stderr. stdout holds nothing else: what handlers print goes"
            " to stderr. A line of INPUT is a bare payload (sent along --route or the app's"
            " ROUTE) or a whole envelope with its own route. An actor on no input's route is"
            " not started, unless a reachable actor takes a Context: it may rewrite its route"
            " to any actor, so then all are started. A GPU actor that needs more GPUs than this"
            " machine has runs on CPU with every GPU hidden, said once on stderr (--strict-gpus"
            " stops the run instead). In-memory by default; --broker"
            " runs the same actors in-process against RabbitMQ; --isolate also runs each actor"
            " as a runtime process plus a sidecar process, exactly as in a pod. Exit code: 0;"
            " 1 if an envelope failed (0 with --allow-failures); 2 for a usage error, a route"
            " that cannot work or an actor that cannot start; 130 on SIGINT (Ctrl-C) and 143 on"
            " SIGTERM, after stopping every process the run started and, on a broker, deleting"
            " the queues of a fresh namespace. If stdout is closed early (`| head`), the run"
            " still finishes and is counted in full; finals then go only to --output."
        ),
    )
    dev.add_argument("app", metavar="APP", help="a folder, a .py file or a module name")
    dev.add_argument("--input", required=True, type=Path, help="JSON Lines file of inputs")
    add_route(dev, "route for bare payloads (default: the app's ROUTE)")
    dev.add_argument("--output", type=Path, help="also write final envelopes to this file")
    dev.add_argument(
        "--payloads",
        action="store_true",
        help=(
            'print only payloads: one line per final, {"id": ID, "payload": ...}, or'
            ' {"id": ID, "error": {"reason", "actor", "message"}} for a failure, where ID is'
            " its input's envelope id; in input order (a line waits for the inputs before"
            " it), a fan-out's finals in tree order, each with its input's id; --output"
            " still gets whole envelopes"
        ),
    )
    dev.add_argument(
        "--allow-failures", action="store_true", help="exit 0 even if some envelopes failed"
    )
    dev.add_argument(
        "--quiet", action="store_true", help="no progress lines, no notices, no summary"
    )
    dev.add_argument(
        "--strict-gpus",
        action="store_true",
        help=(
            "exit 2 before starting if a GPU actor the inputs reach needs more GPUs than this"
            " machine has, as asya serve does (default: it runs on CPU, said once on stderr;"
            " an actor declaring cpu_fallback=True runs on CPU either way)"
        ),
    )
    add_limits(dev)
    dev.add_argument(
        "--poll-ms",
        type=positive_int,
        default=50,
        metavar="MS",
        help="queue-depth poll interval for scaling (50)",
    )
    add_broker(dev, default_help="in-memory")
    dev.add_argument(
        "--isolate",
        action="store_true",
        help="one runtime process and one sidecar process per actor (needs --broker)",
    )
    dev.set_defaults(run=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """`asya dev`; see the parser's description for what it does and its exit codes.

    Raises:
        ActorDefinitionError: the app cannot be imported or an actor cannot start.
        SettingsError: the route cannot work for these inputs, or tracing is asked for
            (OTEL_TRACES_EXPORTER) without the otel extra.
    """
    # From the app's import on: a module that prints as it loads is the app's output too.
    with stdout_to_stderr() as stdout:
        return _dev(args, settings, stdout)


def _dev(args: argparse.Namespace, settings: Settings, stdout: IO[str]) -> int:
    app = load_app(args.app)
    try:
        lines = args.input.read_bytes().splitlines()
    except OSError as exc:
        print(f"asya: cannot read --input: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.isolate and not args.broker:
        print("asya: --isolate needs --broker amqp://...", file=sys.stderr)
        return EXIT_USAGE
    check_run(app, lines, args.route)
    telemetry.start_tracing(settings.tracing, service_name="asya-dev")
    output = args.output.open("w", encoding="utf-8") if args.output else None
    finals = FinalsWriter(stdout, output, payloads=args.payloads)
    try:
        main = _until_signal(_run(args, settings, app, lines, finals))
        result = event_loop.run(main, settings.process.event_loop)
        finals.finish()
    except _TerminatedError:
        print("asya: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    finally:
        if output is not None:
            output.close()
        telemetry.stop_tracing()
    if not args.quiet:
        _print_summary(app, finals, result)
    if result.stats.failed and not args.allow_failures:
        return EXIT_FAILURES
    return EXIT_OK


def _print_summary(app: App, finals: FinalsWriter, result: DevResult) -> None:
    if not finals.stdout_open:
        print(
            f"asya: stdout was closed after {finals.written_to_stdout} line(s);"
            " the run went on and every envelope is counted below",
            file=sys.stderr,
        )
    route = [name for name in app.route or () if name in result.actors]
    order = route + [name for name in result.actors if name not in route]
    print("\n" + format_summary(result.stats, order, result.elapsed_s), file=sys.stderr)


class _TerminatedError(Exception):
    """The run was stopped by SIGTERM, and everything it started was cleaned up."""


async def _until_signal(main: Coroutine[Any, Any, T]) -> T:
    """Run `main`; on SIGTERM or SIGINT cancel it, so that its cleanup runs, then raise
    `_TerminatedError` (SIGTERM) or KeyboardInterrupt (SIGINT, Ctrl-C).

    Whatever ends the run once a signal came is the signal's: the cancellation, a process the
    same signal (sent to the whole process group, as a terminal's Ctrl-C is) stopped first, or
    a cleanup step that failed on the way out. A second signal while cleaning up is ignored.
    SIGINT is caught by a Python-level handler, which runs as soon as the signal arrives, before
    the loop sees a child that the same signal stopped.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    stopped_by: int | None = None

    def stop(signum: int) -> None:
        nonlocal stopped_by
        if stopped_by is None:
            stopped_by = signum
            task.cancel()
            loop.call_soon_threadsafe(lambda: None)  # wake the loop if it sleeps

    loop.add_signal_handler(signal.SIGTERM, stop, signal.SIGTERM)
    previous_sigint = signal.signal(signal.SIGINT, lambda signum, _frame: stop(signum))
    try:
        return await main
    except BaseException as exc:
        if stopped_by == signal.SIGTERM:
            raise _TerminatedError from exc
        if stopped_by == signal.SIGINT:
            raise KeyboardInterrupt from exc
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        signal.signal(signal.SIGINT, previous_sigint)


async def _run(
    args: argparse.Namespace,
    settings: Settings,
    app: App,
    lines: list[bytes],
    finals: FinalsWriter,
) -> DevResult:
    clock, rng = SystemClock(), random.Random()
    options = DevOptions(
        route=args.route,
        mesh=MeshOptions(
            limits=limits(args, settings),
            poll_interval_s=args.poll_ms / 1000,
            depth=settings.process.pipeline_depth,
            gpu_mode=GpuMode.ASSIGN if args.strict_gpus else GpuMode.ASSIGN_OR_CPU,
        ),
    )
    emit, on_input = finals.emit, finals.on_input

    def progress(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    run = functools.partial(
        run_dev,
        app,
        lines,
        emit=emit,
        progress=progress,
        clock=clock,
        rng=rng,
        options=options,
        on_input=on_input,
    )
    if not args.broker:
        return await run()
    namespace = args.namespace or fresh_namespace()
    transport = broker_transport(args.broker, namespace, settings, name="asya-dev")
    connected = False
    try:
        await transport.connect()
        connected = True
        if not args.namespace:
            progress(f"asya: namespace '{namespace}' (its queues are deleted after the run)")
        with tempfile.TemporaryDirectory(prefix="asya-dev-") as workdir:
            mesh = None
            if args.isolate:
                mesh = _isolated(
                    app, transport, args.broker, namespace, Path(workdir), options.mesh, clock, rng
                )
            return await run(transport=transport, mesh=mesh)
    finally:
        try:
            if connected and not args.namespace:  # a fresh namespace leaves nothing behind
                await transport.delete_queues([*(s.name for s in app.specs), HAPPY_END, ERROR_END])
        finally:
            await transport.aclose()


def _isolated(
    app: App,
    transport: RabbitMQTransport,
    url: str,
    namespace: str,
    workdir: Path,
    options: MeshOptions,
    clock: SystemClock,
    rng: random.Random,
) -> MeshFactory:
    def start(stats: RunStats, plan: RunPlan) -> IsolatedMesh:
        return IsolatedMesh(
            plan.app,
            transport=transport,
            broker_url=url,
            namespace=namespace,
            hooks=stats,
            sink=stats,
            workdir=workdir,
            env=dict(os.environ),
            clock=clock,
            rng=rng,
            options=options,
            gpus=plan.gpus.assigner if plan.gpus is not None else None,
        )

    return start
