"""`asya send`: one envelope into a mesh — on a broker, or an app started in-process.

With `--wait` (always, in-process) it waits until every envelope descending from the one sent
is final — a generator on the route fans out, and each child ends on its own — prints each
final as a JSON line, in tree order, and exits 1 if any of them failed. On a timeout it
prints the finals that came, says how much of the tree they cover, and exits 1. stdout holds
nothing else: what the app's handlers print (with `--app`) goes to stderr.

`--timeout` is both the wait and the envelope's deadline (`Client.call`): what has not run
when the caller stops waiting ends in `error-end` (`DeadlineExceeded`) instead of running for
nobody. So its default is long enough for the first call to a scaled-to-zero GPU actor.
A route is checked as `asya dev` checks it (`check_route`), against the app in-process; on a
broker an actor with no queue is guessed from the namespace's queues when the management API
answers.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from typing import IO, TYPE_CHECKING, Final

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
    seconds,
    write_line,
)
from asya.cli.status import read_queues
from asya.client import CallTimeoutError, Client, Results
from asya.clock import SystemClock
from asya.envelope import Envelope
from asya.errors import TransportError, UnknownActorError
from asya.local.discovery import load_app
from asya.local.inputs import check_route
from asya.local.mesh import Mesh, MeshOptions
from asya.local.report import RunStats
from asya.routing import closest_actor, is_end_actor
from asya.settings import Settings
from asya.status import actor_of_queue, management_url_of
from asya.transport.memory import MemoryTransport

if TYPE_CHECKING:
    from asya.cli.options import Subparsers

WAIT_S: Final = 600.0
"""`--timeout`'s default, the wait and the deadline: a scaled-to-zero GPU actor's first call
waits for the scaler's poll (30 s), maybe a new node and a pull of a large image (minutes) and
its model's load, and must not expire on the way."""


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
        "--timeout",
        type=seconds,
        metavar="S",
        help=(
            "with --wait (always, in-memory): seconds to wait for the finals, and also the"
            " envelope's deadline, S seconds after sending: what has not run by then ends in"
            f" error-end as DeadlineExceeded ({WAIT_S:g}, so that the first call to a"
            " scaled-to-zero GPU actor can wait for a node, an image pull and a model load)"
        ),
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
    if broker is not None and args.timeout is not None and not args.wait:
        print(
            "asya: --timeout is how long --wait waits (and the envelope's deadline): add --wait;"
            " without it nothing waits and the envelope has no deadline",
            file=sys.stderr,
        )
        return EXIT_USAGE
    headers = dict(args.header)
    timeout_s = WAIT_S if args.timeout is None else args.timeout
    try:
        if broker is not None:
            main = _on_broker(args, settings, broker, route, payload, headers, timeout_s)
            final = event_loop.run(main, settings.process.event_loop)
        else:
            assert app is not None
            if args.route:
                check_route(route, (s.name for s in app.specs), option="--route")
            local = _in_memory(args, settings, app.specs, route, payload, headers, timeout_s)
            final = event_loop.run(local, settings.process.event_loop)
    except UnknownActorError as exc:
        namespace = args.namespace or settings.transport.namespace
        names = [s.name for s in app.specs] if app is not None else []
        print(f"asya: {_unknown_actor(exc, names, broker, namespace, settings)}", file=sys.stderr)
        return EXIT_USAGE
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
    timeout_s: float,
) -> Results | str:
    namespace = args.namespace or settings.transport.namespace
    async with Client(url, namespace=namespace, limits=limits(args, settings)) as client:
        if args.wait:
            return await client.call(route, payload, timeout_s=timeout_s, headers=headers)
        return await client.send(route, payload, headers=headers)


async def _in_memory(
    args: argparse.Namespace,
    settings: Settings,
    specs: tuple[ActorSpec, ...],
    route: tuple[str, ...],
    payload: object,
    headers: dict[str, str],
    timeout_s: float,
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
        return await client.call(route, payload, timeout_s=timeout_s, headers=headers)


def _unknown_actor(
    exc: UnknownActorError, app: list[str], broker: str | None, namespace: str, settings: Settings
) -> str:
    """`exc` with the actor it most likely meant: of the broker namespace's queues when the
    management API can be read (else how to list them), or of the app in-process."""
    actors = app
    if broker is not None:
        try:
            main = read_queues(management_url_of(broker))
            queues = event_loop.run(main, settings.process.event_loop)
        except TransportError:
            return (
                f"{exc}; is the actor served in namespace '{namespace}'? (asya status --broker"
                f" URL --namespace {namespace} lists its actors)"
            )
        found = (actor_of_queue(namespace, name) for name in queues)
        actors = [f[0] for f in found if f is not None and not f[1] and not is_end_actor(f[0])]
    guess = closest_actor(exc.actor, actors)
    if guess is not None:
        return f"{exc}; did you mean '{guess}'?"
    where = "the app" if broker is None else f"namespace '{namespace}'"
    return f"{exc}; the actors of {where} are: {', '.join(sorted(set(actors))) or 'none'}"


async def _ignore(envelope: Envelope) -> None:
    return None


def _header(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--header must be KEY=VALUE, got '{text}'")
    return key, value
