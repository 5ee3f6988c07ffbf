"""`asya send`: one envelope into a mesh — on a broker, or an app started in-process.

With `--wait` (always, in-process) it waits until every envelope descending from the one sent
is final — a generator on the route fans out, and each child ends on its own — prints each
final as a JSON line, in tree order, and exits 1 if any of them failed. On a timeout it
prints the finals that came, says how much of the tree they cover, and exits 1. stdout holds
nothing else: what the app's handlers print (with `--app`) goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from typing import IO, TYPE_CHECKING

from asya import event_loop
from asya.actor import ActorSpec
from asya.cli.finals import stdout_to_stderr
from asya.cli.options import (
    EXIT_FAILURES,
    EXIT_OK,
    EXIT_USAGE,
    add_broker,
    add_limits,
    add_route,
    limits,
    write_line,
)
from asya.client import CallTimeoutError, Client, Results
from asya.clock import SystemClock
from asya.envelope import Envelope
from asya.local.discovery import load_app
from asya.local.mesh import Mesh, MeshOptions
from asya.local.report import RunStats
from asya.settings import Settings
from asya.transport.memory import MemoryTransport

if TYPE_CHECKING:
    from asya.cli.options import Subparsers


def add_parser(commands: Subparsers) -> None:
    send = commands.add_parser(
        "send",
        help="send one envelope and (optionally) print its final envelopes",
        description=(
            "With --broker (or ASYA_BROKER_URL): publish one payload along --route to a running"
            " mesh and print its id, or with --wait its final envelopes. Without a broker: start"
            " --app's actors in-process, send, wait and print the final envelopes. Waiting"
            " lasts until every envelope made from the one sent (fan-out children included) is"
            " final; each is printed as a JSON line. Exits 1 when any of them failed."
        ),
    )
    send.add_argument("--app", help="a folder, a .py file or a module name (in-memory mode)")
    add_route(send, "actors to visit, in order (default: the app's ROUTE)")
    send.add_argument("--payload", required=True, help="the payload, as JSON")
    send.add_argument(
        "--header",
        action="append",
        default=[],
        type=_header,
        metavar="KEY=VALUE",
        help="a header to send (repeatable)",
    )
    send.add_argument(
        "--wait",
        action="store_true",
        help="wait for every final envelope (always, in-memory)",
    )
    send.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the result (60)"
    )
    add_limits(send)
    add_broker(send, default_help="ASYA_BROKER_URL, else in-memory with --app")
    send.set_defaults(run=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    with stdout_to_stderr() as stdout:
        return _send(args, settings, stdout)


def _send(args: argparse.Namespace, settings: Settings, stdout: IO[str]) -> int:
    try:
        payload = json.loads(args.payload)
    except json.JSONDecodeError as exc:
        print(f"asya: --payload is not valid JSON: {exc}", file=sys.stderr)
        return EXIT_USAGE
    broker = args.broker or settings.transport.url
    app = load_app(args.app) if args.app else None
    route = args.route or (app.route if app is not None else None)
    if not route:
        print("asya: pass --route a,b,c (or --app with a ROUTE)", file=sys.stderr)
        return EXIT_USAGE
    if broker is None and app is None:
        print(
            "asya: pass --broker URL (or set ASYA_BROKER_URL), or --app to run in-memory",
            file=sys.stderr,
        )
        return EXIT_USAGE
    headers = dict(args.header)
    try:
        if broker is not None:
            main = _on_broker(args, settings, broker, route, payload, headers)
            final = event_loop.run(main, settings.process.event_loop)
        else:
            assert app is not None
            local = _in_memory(args, settings, app.specs, route, payload, headers)
            final = event_loop.run(local, settings.process.event_loop)
    except CallTimeoutError as exc:
        _write_all(stdout, exc.results)
        print(f"asya: {exc}", file=sys.stderr)
        return EXIT_FAILURES
    if isinstance(final, str):
        print(json.dumps({"id": final}), file=stdout)
        return EXIT_OK
    _write_all(stdout, final)
    return EXIT_OK if final.ok else EXIT_FAILURES


def _write_all(stdout: IO[str], results: Results) -> None:
    for envelope in results:
        write_line(stdout, envelope)


async def _on_broker(
    args: argparse.Namespace,
    settings: Settings,
    url: str,
    route: tuple[str, ...],
    payload: object,
    headers: dict[str, str],
) -> Results | str:
    namespace = args.namespace or settings.transport.namespace
    async with Client(url, namespace=namespace, limits=limits(args, settings)) as client:
        if args.wait:
            return await client.call(route, payload, timeout_s=args.timeout, headers=headers)
        return await client.send(route, payload, headers=headers)


async def _in_memory(
    args: argparse.Namespace,
    settings: Settings,
    specs: tuple[ActorSpec, ...],
    route: tuple[str, ...],
    payload: object,
    headers: dict[str, str],
) -> Results:
    transport = MemoryTransport()
    clock, rng = SystemClock(), random.Random()
    stats = RunStats(_ignore)
    options = MeshOptions(limits=limits(args, settings), depth=settings.process.pipeline_depth)
    async with Mesh(
        specs,
        transport=transport,
        hooks=stats,
        sink=stats,
        clock=clock,
        rng=rng,
        options=options,
    ):
        client = Client(transport, limits=options.limits, clock=clock, rng=rng)
        return await client.call(route, payload, timeout_s=args.timeout, headers=headers)


async def _ignore(envelope: Envelope) -> None:
    return None


def _header(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--header must be KEY=VALUE, got '{text}'")
    return key, value
