"""`asya replay`: send failures back to the actor that failed, each at most once.

Reads the namespace's replays ledger, then its failures (from the oldest kept, or `--since`,
to the end as of the start); each failure that passes the filters and is not in the ledger is
sent back as `asya.crew.records.plan_replay` says (to `route.curr`, with the route it had
left, attempt 1, the failure's error kept in `status.retries`, header `asya-replay-of`). Each
send is one confirmed `RecordStore.resubmit`: the actor's queue and the ledger get it together
or not at all, so a replay killed half-way and run again sends every failure exactly once.
`--force` ignores the ledger. `--dry-run` prints what would be sent, as JSON lines. At the
end, a count per reason and actor on stderr. Exit 1 when `--id` names no failure.
"""

from __future__ import annotations

import argparse
import collections
import sys
from typing import IO, TYPE_CHECKING

from asya import event_loop
from asya.cli.options import EXIT_FAILURES, EXIT_OK, positive_int, write_line
from asya.cli.results import (
    add_record_filters,
    envelopes,
    filters,
    open_broker,
    start,
    until_signal,
)
from asya.clock import SystemClock
from asya.crew.records import (
    Filters,
    failure_key,
    is_replayable,
    plan_replay,
    replayed_key,
)
from asya.envelope import END_LIMITS, encode_envelope
from asya.errors import UnknownActorError
from asya.settings import Settings
from asya.transport.records import FIRST, RecordKind, RecordStore, Start

if TYPE_CHECKING:
    from asya.cli.options import Subparsers
    from asya.transport.rabbitmq import RabbitMQTransport


def add_parser(commands: Subparsers) -> None:
    replay = commands.add_parser(
        "replay",
        help="send failures kept on a broker back to the actor that failed",
        description=(
            "Send each failure that passes the filters back to the actor it failed at, with"
            " the route it had left and a fresh attempt count; its error stays in"
            " status.retries and the header asya-replay-of names the failure. A failure is"
            " replayed at most once (the replays ledger says which were), unless --force."
            " Exit 1 if --id names no failure."
        ),
    )
    add_record_filters(replay)
    replay.add_argument("--dry-run", action="store_true", help="print, do not send")
    replay.add_argument("--limit", type=positive_int, metavar="N", help="send at most N")
    replay.add_argument("--force", action="store_true", help="also replay failures replayed before")
    replay.set_defaults(run=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    where = start(args, settings)
    transport = open_broker(args, settings, "replay")
    main = _replay(transport, where, filters(args), args, sys.stdout, sys.stderr)
    return event_loop.run(until_signal(main), settings.process.event_loop)


async def _replay(
    transport: RabbitMQTransport,
    where: Start,
    only: Filters,
    args: argparse.Namespace,
    out: IO[str],
    err: IO[str],
) -> int:
    async with transport:
        store = transport.records
        done = set() if args.force else await _replayed(store)
        counts: collections.Counter[tuple[str, str]] = collections.Counter()
        found = already = 0
        clock = SystemClock()
        async for record, failure in envelopes(store, RecordKind.FAILURES, where, follow=False):
            if not only.matches(failure):
                continue
            found += 1
            key = failure_key(record, failure)
            if key in done:
                already += 1
                continue
            if not is_replayable(failure):
                print(f"asya: {failure.id}: no actor to send it back to", file=err)
                continue
            if args.limit is not None and sum(counts.values()) >= args.limit:
                break
            replay = plan_replay(failure, key, clock.now())
            if args.dry_run:
                write_line(out, replay)
            else:
                try:
                    await store.resubmit(
                        replay.route.curr, encode_envelope(replay, END_LIMITS, checked=True)
                    )
                except UnknownActorError:
                    print(f"asya: {failure.id}: actor '{replay.route.curr}' has no queue", file=err)
                    continue
            reason = failure.status.reason.value if failure.status.reason else "-"
            counts[(reason, replay.route.curr)] += 1
    if args.envelope_id is not None and found == 0:
        print(f"asya: no failure with id '{args.envelope_id}' is kept", file=err)
        return EXIT_FAILURES
    _summary(counts, already, dry_run=args.dry_run, err=err)
    return EXIT_OK


async def _replayed(store: RecordStore) -> set[str]:
    """The keys of every failure the ledger says was replayed."""
    keys = set()
    async for _, entry in envelopes(store, RecordKind.REPLAYS, FIRST, follow=False):
        key = replayed_key(entry)
        if key is not None:
            keys.add(key)
    return keys


def _summary(
    counts: collections.Counter[tuple[str, str]], already: int, *, dry_run: bool, err: IO[str]
) -> None:
    verb = "would replay" if dry_run else "replayed"
    print(f"asya: {verb} {sum(counts.values())}, skipped {already} replayed before", file=err)
    for (reason, actor), count in sorted(counts.items()):
        print(f"  {reason:<24} {actor:<24} {count}", file=err)
