"""`asya results`: print the final envelopes a namespace kept (its results, or its failures).

Reads the namespace's end records (`asya.transport.records`) from the first kept, or from
`--since`, and prints each envelope that passes the filters as a JSON line (`--table`: one
row each). Without `--follow` it stops at the end of the log as it was when it started; with
`--follow` it goes on printing new ones until SIGINT (exit 130) or SIGTERM (exit 143).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Coroutine
from typing import IO, TYPE_CHECKING, Any

from asya import event_loop
from asya.cli.options import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    add_broker,
    broker_transport,
    write_line,
)
from asya.clock import SystemClock
from asya.crew.records import SINCE_FORMATS, Filters, ended_at, parse_since
from asya.envelope import END_LIMITS, Envelope, Reason, decode_envelope
from asya.errors import EnvelopeError, SettingsError
from asya.settings import Settings, env_var
from asya.transport.records import FIRST, Record, RecordKind, RecordStore, Start

if TYPE_CHECKING:
    from asya.cli.options import Subparsers
    from asya.transport.rabbitmq import RabbitMQTransport


def add_parser(commands: Subparsers) -> None:
    results = commands.add_parser(
        "results",
        help="print the final envelopes kept on a broker (results, or --failed)",
        description=(
            "Print the final envelopes a namespace kept, as JSON lines (a table with --table):"
            " those that reached happy-end, or with --failed those that reached error-end."
            " Reads from the oldest kept (or --since) to the end as of the start; --follow"
            " keeps printing new ones until Ctrl-C or SIGTERM."
        ),
    )
    add_record_filters(results)
    results.add_argument("--failed", action="store_true", help="failures instead of results")
    results.add_argument("--follow", action="store_true", help="keep printing new ones")
    results.add_argument("--table", action="store_true", help="a table instead of JSON lines")
    results.set_defaults(run=run)


def add_record_filters(parser: argparse.ArgumentParser) -> None:
    """--broker, --namespace and the filters `results` and `replay` share."""
    add_broker(parser, default_help=f"{env_var('broker_url')}")
    parser.add_argument("--since", metavar="T", help=f"stored at or after T: {SINCE_FORMATS}")
    parser.add_argument("--id", dest="envelope_id", metavar="ID", help="only this envelope id")
    parser.add_argument(
        "--reason",
        choices=[reason.value for reason in Reason],
        metavar="R",
        help="only this status.reason (HandlerError, Timeout, ...)",
    )
    parser.add_argument("--actor", metavar="A", help="only envelopes that ended at actor A")


def filters(args: argparse.Namespace) -> Filters:
    return Filters(reason=args.reason, actor=args.actor, envelope_id=args.envelope_id)


def start(args: argparse.Namespace, settings: Settings) -> Start:
    """Where to start reading, from --since.

    Raises:
        SettingsError: --since is not a time; the message says which formats it takes.
    """
    if args.since is None:
        return FIRST
    try:
        return Start(since=parse_since(args.since, SystemClock().now()))
    except ValueError as exc:
        raise SettingsError(str(exc), variable="--since", value=args.since) from None


def open_broker(args: argparse.Namespace, settings: Settings, name: str) -> RabbitMQTransport:
    """The transport for --broker / --namespace (or their variables).

    Raises:
        SettingsError: no broker is named.
    """
    url = args.broker or settings.transport.url
    if url is None:
        raise SettingsError(
            f"asya {name} reads a broker: give --broker URL or set {env_var('broker_url')}",
            variable="--broker",
            value=None,
        )
    return broker_transport(
        url, args.namespace or settings.transport.namespace, settings, name=f"asya-{name}"
    )


async def envelopes(
    records: RecordStore, kind: RecordKind, where: Start, *, follow: bool
) -> AsyncIterator[tuple[Record, Envelope]]:
    """Each record of `kind` with its envelope (a record that is not one is skipped)."""
    async with contextlib.aclosing(records.read(kind, start=where, follow=follow)) as stored:
        async for record in stored:
            try:
                yield record, decode_envelope(record.body, END_LIMITS)
            except EnvelopeError:
                continue


def run(args: argparse.Namespace, settings: Settings) -> int:
    where = start(args, settings)
    transport = open_broker(args, settings, "results")
    kind = RecordKind.FAILURES if args.failed else RecordKind.RESULTS
    main = _print(transport, kind, where, filters(args), args, sys.stdout)
    return event_loop.run(until_signal(main), settings.process.event_loop)


async def until_signal(main: Coroutine[Any, Any, int]) -> int:
    """Run `main` until it ends, or until SIGINT (130) / SIGTERM (143) cancels it."""
    task = asyncio.ensure_future(main)
    loop = asyncio.get_running_loop()
    stopped_by: list[int] = []
    for signum, code in ((signal.SIGINT, EXIT_INTERRUPTED), (signal.SIGTERM, EXIT_TERMINATED)):
        loop.add_signal_handler(signum, _stop, task, stopped_by, code)
    try:
        return await task
    except asyncio.CancelledError:
        if stopped_by:
            return stopped_by[0]
        raise
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def _stop(task: asyncio.Task[int], stopped_by: list[int], code: int) -> None:
    stopped_by.append(code)
    task.cancel()


async def _print(
    transport: RabbitMQTransport,
    kind: RecordKind,
    where: Start,
    only: Filters,
    args: argparse.Namespace,
    out: IO[str],
) -> int:
    async with transport:
        if args.table:
            out.write(f"{'OFFSET':>8}  {'STORED AT':<24}  {'ID':<28}  {'ACTOR':<20}  REASON\n")
        async for record, envelope in envelopes(transport.records, kind, where, follow=args.follow):
            if not only.matches(envelope):
                continue
            if args.table:
                out.write(_row(record, envelope))
                out.flush()
            else:
                write_line(out, envelope)
    return EXIT_OK


def _row(record: Record, envelope: Envelope) -> str:
    reason = envelope.status.reason.value if envelope.status.reason else "-"
    stored = record.stored_at.isoformat(timespec="milliseconds")
    return (
        f"{record.offset:>8}  {stored:<24}  {envelope.id:<28}  {ended_at(envelope):<20}  {reason}\n"
    )
