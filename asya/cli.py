"""The `asya` command: `asya dev` runs an app locally, `asya send` sends one envelope,
`asya admission simulate` runs the admission engine on a scenario.

An entry point: reads the environment once (`asya.settings`), parses arguments (argparse),
calls the library and turns its errors into messages and exit codes. Exit codes: 0 success,
1 some envelopes failed (unless --allow-failures), 2 bad usage or an app that cannot start.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import msgspec

from asya.admission.model import load_scenario
from asya.admission.scheduler import result_as_dict, simulate
from asya.client import Client
from asya.clock import SystemClock
from asya.envelope import Envelope, Limits
from asya.errors import AdmissionError, AsyaError
from asya.local.discovery import load_app
from asya.local.mesh import Mesh, MeshOptions
from asya.local.report import RunStats, format_summary
from asya.local.runner import DevOptions, run_dev
from asya.settings import Settings, load_settings
from asya.transport.memory import MemoryTransport

EXIT_OK = 0
EXIT_FAILURES = 1
EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `asya` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        settings = load_settings(os.environ)
    except AsyaError as exc:
        print(f"asya: {exc}", file=sys.stderr)
        return EXIT_USAGE
    logging.basicConfig(level=args.log_level or settings.log.log_level, stream=sys.stderr)
    try:
        code: int = args.run(args, settings)
    except AsyaError as exc:
        print(f"asya: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("asya: interrupted", file=sys.stderr)
        return 130
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="asya",
        description="Multi-step AI/ML pipelines built from actors.",
    )
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING (default) or ERROR")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    dev = commands.add_parser(
        "dev",
        help="run an app's actors locally over a file of inputs",
        description=(
            "Start every actor found in APP on the in-memory transport, scale each by its"
            " queue depth, feed the inputs, print each final envelope as a JSON line on stdout"
            " and a summary per actor on stderr. A line of INPUT is a bare payload (sent along"
            " --route or the app's ROUTE) or a whole envelope with its own route."
        ),
    )
    dev.add_argument("app", metavar="APP", help="a folder, a .py file or a module name")
    dev.add_argument("--input", required=True, type=Path, help="JSON Lines file of inputs")
    _add_route(dev, "route for bare payloads (default: the app's ROUTE)")
    dev.add_argument("--output", type=Path, help="also write final envelopes to this file")
    dev.add_argument(
        "--allow-failures", action="store_true", help="exit 0 even if some envelopes failed"
    )
    dev.add_argument("--quiet", action="store_true", help="no progress lines, no summary")
    _add_limits(dev)
    dev.add_argument(
        "--poll-ms", type=int, default=50, help="queue-depth poll interval for scaling (50)"
    )
    dev.set_defaults(run=_run_dev)

    send = commands.add_parser(
        "send",
        help="send one envelope to an app and print its final envelope",
        description=(
            "Start APP's actors in-process on the in-memory transport, send one payload along"
            " --route, wait for its final envelope and print it. Exit 1 if it failed."
        ),
    )
    send.add_argument("--app", required=True, help="a folder, a .py file or a module name")
    _add_route(send, "actors to visit, in order (default: the app's ROUTE)")
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
        "--timeout", type=float, default=60.0, help="seconds to wait for the result (60)"
    )
    _add_limits(send)
    send.set_defaults(run=_run_send)

    admission = commands.add_parser(
        "admission", help="what-if tools for quotas, preemption and gangs"
    )
    admission_commands = admission.add_subparsers(required=True, metavar="COMMAND")
    simulate = admission_commands.add_parser(
        "simulate",
        help="run scheduling cycles on a scenario file and print the decisions as JSON",
        description=(
            "Load pools, cohorts and workloads from SCENARIO (YAML or JSON), run scheduling"
            " cycles until one changes nothing (or --cycles), and print which workloads hold"
            " quota, which were preempted, and why the rest are pending."
            " See docs/admission.md for the format."
        ),
    )
    simulate.add_argument("scenario", type=Path, metavar="SCENARIO", help="a .yaml or .json file")
    simulate.add_argument(
        "--cycles", type=int, help="stop after this many cycles (default: until nothing changes)"
    )
    simulate.set_defaults(run=_run_simulate)
    return parser


def _add_route(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument("--route", type=_route, help=f"comma-separated actor names: {text}")


def _add_limits(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-payload-bytes",
        type=int,
        help="largest encoded payload (default: ASYA_MAX_PAYLOAD_BYTES or 4 MiB)",
    )
    parser.add_argument(
        "--hop-limit", type=int, help="most actors one envelope may visit (default: 64)"
    )


def _route(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise argparse.ArgumentTypeError("route needs at least one actor name")
    return names


def _limits(args: argparse.Namespace, settings: Settings) -> Limits:
    return Limits(
        max_payload_bytes=args.max_payload_bytes or settings.limits.max_payload_bytes,
        hop_limit=args.hop_limit or settings.limits.hop_limit,
    )


def _run_dev(args: argparse.Namespace, settings: Settings) -> int:
    app = load_app(args.app)
    try:
        lines = args.input.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        print(f"asya: cannot read --input: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not (args.route or app.route):
        print(
            "asya: no route for bare payloads: pass --route a,b,c or declare ROUTE in the app"
            " (lines that are whole envelopes carry their own)",
            file=sys.stderr,
        )
    output = args.output.open("w", encoding="utf-8") if args.output else None
    options = DevOptions(
        route=args.route,
        mesh=MeshOptions(limits=_limits(args, settings), poll_interval_s=args.poll_ms / 1000),
    )

    async def emit(envelope: Envelope) -> None:
        _write_line(sys.stdout, envelope)
        if output is not None:
            _write_line(output, envelope)

    def progress(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    try:
        result = asyncio.run(
            run_dev(
                app,
                lines,
                emit=emit,
                progress=progress,
                clock=SystemClock(),
                rng=random.Random(),
                options=options,
            )
        )
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


def _run_send(args: argparse.Namespace, settings: Settings) -> int:
    app = load_app(args.app)
    route = args.route or app.route
    if not route:
        print("asya: pass --route a,b,c (the app declares no ROUTE)", file=sys.stderr)
        return EXIT_USAGE
    try:
        payload = json.loads(args.payload)
    except json.JSONDecodeError as exc:
        print(f"asya: --payload is not valid JSON: {exc}", file=sys.stderr)
        return EXIT_USAGE
    headers = dict(args.header)

    async def send() -> Envelope:
        transport = MemoryTransport()
        clock, rng = SystemClock(), random.Random()
        stats = RunStats(_ignore)
        options = MeshOptions(limits=_limits(args, settings))
        async with Mesh(
            app.specs,
            transport=transport,
            observer=stats,
            sink=stats,
            clock=clock,
            rng=rng,
            options=options,
        ):
            client = Client(transport, limits=options.limits, clock=clock, rng=rng)
            return await client.call(route, payload, timeout_s=args.timeout, headers=headers)

    try:
        final = asyncio.run(send())
    except TimeoutError:
        print(f"asya: no final envelope within {args.timeout} s", file=sys.stderr)
        return EXIT_FAILURES
    _write_line(sys.stdout, final)
    return EXIT_OK if final.status.reason is None else EXIT_FAILURES


def _run_simulate(args: argparse.Namespace, settings: Settings) -> int:
    try:
        text = args.scenario.read_text(encoding="utf-8")
    except OSError as exc:
        print(f"asya: cannot read the scenario: {exc}", file=sys.stderr)
        return EXIT_USAGE
    raw = _parse_scenario(text, args.scenario)
    if args.cycles is not None and args.cycles < 1:
        raise AdmissionError("--cycles must be at least 1")
    result = simulate(load_scenario(raw), max_cycles=args.cycles)
    print(json.dumps(result_as_dict(result), indent=2))
    return EXIT_OK


def _parse_scenario(text: str, path: Path) -> dict[str, Any]:
    """Raises: AdmissionError if the file is not a mapping in YAML or JSON."""
    if path.suffix == ".json":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise AdmissionError(f"{path}: not valid JSON: {exc}") from exc
    else:
        try:
            import yaml
        except ImportError as exc:
            raise AdmissionError(
                f"{path}: reading YAML needs PyYAML: pip install 'asya[yaml]' (or use .json)"
            ) from exc
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise AdmissionError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise AdmissionError(f"{path}: a scenario is a mapping with cohorts, pools and workloads")
    return raw


async def _ignore(envelope: Envelope) -> None:
    return None


def _header(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--header must be KEY=VALUE, got '{text}'")
    return key, value


def _write_line(stream: IO[str], envelope: Envelope) -> None:
    stream.write(msgspec.json.encode(envelope).decode() + "\n")
    stream.flush()


if __name__ == "__main__":
    raise SystemExit(main())
