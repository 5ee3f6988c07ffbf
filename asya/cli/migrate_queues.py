"""`asya migrate-queues`: move what a namespace's queues of the old names still hold.

Actor queues were once named `asya-{namespace}-{actor}`, a name two (namespace, actor) pairs
could share (`ml`'s `a-x` and `ml-a`'s `x`); they are `asya.{namespace}.{actor}` now
(`asya.queue_names`). After an upgrade the old queues hold what was sent before it, and
nothing consumes them. This command drains them into the new ones, then deletes them: for APP's
actors (and `--actors`) and the end actors, each old queue and old retry delay queue that
exists is listed with what it holds; it refuses while a consumer is attached to any (the old
version still runs: let it finish or stop it), asks (`--yes` for scripts), declares each
actor's new queue, moves the messages one by one (published, confirmed, then acked: none is
lost, one can arrive twice if the command dies between the two) and deletes each old queue
once it is empty and unconsumed: an actor's old queue is unbound from the exchange first, so
an old client still publishing gets its message back as unroutable instead of losing it with
the queue (`_move`). A message waiting in an old delay queue goes to the actor's
queue at once (its wait is cut short). An old name another namespace on the broker may also
own (its parking queue exists) is kept and said so: what it holds cannot be told apart by name.
The parking queue and the records' streams kept their names and are not touched.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Final

from asya import event_loop
from asya.cli.options import (
    EXIT_FAILURES,
    EXIT_OK,
    add_namespace_queues,
    broker_transport,
    confirmed,
    namespace_queues,
)
from asya.local.report import aligned
from asya.queue_names import legacy_delay_queue_name, legacy_queue_name, legacy_readings
from asya.routing import END_ACTORS
from asya.settings import Settings
from asya.status import without_credentials
from asya.transport.base import parking_queue_name

if TYPE_CHECKING:
    from asya.cli.options import Subparsers
    from asya.transport.rabbitmq import RabbitMQTransport
    from asya.transport.rabbitmq_namespace import NamespaceQueues, QueueState


def add_parser(commands: Subparsers) -> None:
    migrate = commands.add_parser(
        "migrate-queues",
        help="move what queues of the old names (asya-NS-ACTOR) hold into the new ones",
        description=(
            "Move the messages of --namespace's queues of the old names (asya-NS-ACTOR and"
            " their -retry-MSms delay queues, for APP's actors, --actors and the end actors)"
            " into the actors' queues of the new names (asya.NS.ACTOR), then delete the old"
            " ones. Lists what it will move and asks first (--yes: do not ask). Refuses while"
            " consumers are attached to an old queue (the old version still runs: let it drain"
            " them or stop it). Each message is confirmed in its new queue before it leaves the"
            " old one. An old name another namespace may also own (ml's a-x was ml-a's x) is"
            " kept and said so. Exit code: 0 moved, or nothing to move; 1 refused, not"
            " confirmed, or some old queue kept; 2 bad usage or a broker that cannot be"
            " reached."
        ),
    )
    add_namespace_queues(
        migrate,
        actors="actors whose old queues to move too",
        namespace_help="the namespace to migrate",
        yes="move without asking (for scripts)",
    )
    migrate.set_defaults(run=run)


@dataclass(frozen=True)
class OldQueue:
    """A queue of the old names that exists, and the actor whose new queue takes its messages."""

    state: QueueState
    actor: str
    shared_with: str | None
    """Another namespace on the broker this old name may also be (then it is kept)."""


def run(args: argparse.Namespace, settings: Settings) -> int:
    """`asya migrate-queues`; see the parser's description.

    Raises:
        SettingsError: no broker or no actor is named, or the RabbitMQ extra is missing.
        ActorDefinitionError: APP cannot be imported.
        TransportError: the broker cannot be reached, or refused a read, a move or a delete.
    """
    url, actors = namespace_queues(args, settings, "move")
    loop = settings.process.event_loop
    transport = broker_transport(url, args.namespace, settings, name="asya-migrate-queues")
    found = event_loop.run(_read(transport, args.namespace, actors | END_ACTORS), loop)
    _show(found, f"namespace '{args.namespace}' on {without_credentials(url)}", sys.stdout)
    movable = [q for q in found if q.shared_with is None]
    if not movable:
        print("asya: nothing to move", file=sys.stderr)
        return EXIT_FAILURES if found else EXIT_OK
    busy = [q.state for q in movable if q.state.consumers > 0]
    if busy:
        consumed = ", ".join(f"{q.name} ({q.consumers})" for q in busy)
        print(
            f"asya: refused, nothing moved: consumers are attached to {consumed}; the old"
            " version still runs: let it drain them, or stop it, and run asya migrate-queues"
            " again",
            file=sys.stderr,
        )
        return EXIT_FAILURES
    messages = sum(q.state.messages for q in movable)
    question = (
        f"move the {messages} message(s) of these {len(movable)} old queue(s) and delete them?"
    )
    if not args.yes and not confirmed(question, sys.stdin):
        print("asya: nothing moved", file=sys.stderr)
        return EXIT_FAILURES
    transport = broker_transport(url, args.namespace, settings, name="asya-migrate-queues")
    moved, kept = event_loop.run(_move(transport, movable), loop)
    deleted = len(movable) - len(kept)
    print(f"asya: moved {moved} message(s); deleted {deleted} old queue(s)", file=sys.stderr)
    if kept:
        print(
            f"asya: kept, a consumer attached or a message arrived meanwhile: {', '.join(kept)}"
            " (run asya migrate-queues again)",
            file=sys.stderr,
        )
    return EXIT_FAILURES if kept or len(movable) < len(found) else EXIT_OK


def _old_names(namespace: str, actor: str) -> list[str]:
    """`actor`'s old queues in the order they are moved: its delay queues before its own, which
    their expired messages are dead-lettered to meanwhile."""
    from asya.transport.rabbitmq import DELAY_LADDER_MS  # after broker_transport found the extra

    delays = [legacy_delay_queue_name(namespace, actor, ms) for ms in DELAY_LADDER_MS]
    return [*delays, legacy_queue_name(namespace, actor)]


def _in_moving_order(actors: set[str]) -> list[str]:
    """The end actors last: the others' old queues dead-letter into error-end's meanwhile."""
    return sorted(actors, key=lambda actor: (actor in END_ACTORS, actor))


async def _read(transport: RabbitMQTransport, namespace: str, actors: set[str]) -> list[OldQueue]:
    from asya.transport.rabbitmq_namespace import NamespaceQueues  # as in _old_names

    found = []
    async with transport:
        queues = NamespaceQueues(transport)
        try:
            for actor in _in_moving_order(actors):
                for state in await queues.states(_old_names(namespace, actor)):
                    shared = await _shared_with(queues, namespace, state.name)
                    found.append(OldQueue(state=state, actor=actor, shared_with=shared))
        finally:
            await queues.aclose()
    return found


async def _shared_with(queues: NamespaceQueues, namespace: str, name: str) -> str | None:
    for other in legacy_readings(namespace, name):
        # Every namespace that ran has a parking queue: declared with its end actors.
        if await queues.state(parking_queue_name(other)) is not None:
            return other
    return None


DELETE_ATTEMPTS: Final = 5
"""How often an old queue is drained again when a message arrived as it was to be deleted."""


async def _move(transport: RabbitMQTransport, old: Sequence[OldQueue]) -> tuple[int, list[str]]:
    """Move each old queue's messages into its actor's queue and delete it once it is empty
    and unconsumed; (messages moved, old queues kept).

    An old client may still publish while this runs. An actor's old queue is first unbound
    from the exchange the old version published through, so a publish there from then on
    comes back to its sender unroutable (an unknown-actor error) instead of landing in a queue
    about to go; a delay queue (published to by name) is deleted only if the broker finds it
    empty as it deletes (classic queues), else drained again. A queue kept is bound again, and
    an actor's queue whose delay queues are kept is kept too (they dead-letter into it)."""
    from asya.transport.rabbitmq import EXCHANGE  # as in _old_names
    from asya.transport.rabbitmq_namespace import NamespaceQueues

    moved = 0
    kept = []
    delays_kept: set[str] = set()
    async with transport:
        queues = NamespaceQueues(transport)
        try:
            for queue in old:
                name = queue.state.name
                await transport.declare(queue.actor)
                routed = name == legacy_queue_name(transport.options.namespace, queue.actor)
                if routed and queue.actor in delays_kept:
                    # Its kept delay queues dead-letter into it through the exchange: unbound,
                    # what they hold would be dropped. Moved, and kept with them.
                    moved += await queues.move(name, queue.actor)
                    kept.append(name)
                    continue
                if routed:
                    await queues.unbind(name, EXCHANGE, name)
                for _ in range(DELETE_ATTEMPTS):
                    moved += await queues.move(name, queue.actor)
                    deleted = await _delete_if_empty(queues, name)
                    if deleted is not False:
                        break
                if deleted is not True:  # still holds messages, or a consumer came
                    kept.append(name)
                    if routed:
                        await queues.bind(name, EXCHANGE, name)
                    else:
                        delays_kept.add(queue.actor)
        finally:
            await queues.aclose()
    return moved, kept


async def _delete_if_empty(queues: NamespaceQueues, name: str) -> bool | None:
    """Delete `name` if it is empty and unconsumed: True deleted, False a message arrived
    since the drain (drain again), None a consumer is attached (keep it)."""
    deleted = await queues.delete_if_empty(name)
    if deleted is not None:
        if deleted:
            return True
        now = await queues.state(name)
        return None if now is not None and now.consumers > 0 else False
    # A quorum queue: checked, then deleted. An actor's queue is unbound by now, and nothing
    # else publishes to it; what lands in the gap is a message sent to it by name.
    now = await queues.state(name)
    if now is None:
        return True
    if now.consumers > 0:
        return None
    if now.messages > 0:
        return False
    await queues.delete(name)
    return True


def _show(found: Sequence[OldQueue], origin: str, out: IO[str]) -> None:
    if not found:
        out.write(f"{origin}: no queues of the old names\n")
        return
    rows: list[Sequence[str]] = [("old queue", "messages", "consumers", "moves to")]
    rows += [
        (q.state.name, str(q.state.messages), str(q.state.consumers), q.actor)
        for q in found
        if q.shared_with is None
    ]
    out.write(f"{origin}:\n")
    if len(rows) > 1:
        out.write("\n".join(aligned(rows)) + "\n")
    for q in found:
        if q.shared_with is not None:
            out.write(
                f"kept: {q.state.name} may also be namespace '{q.shared_with}''s, which is on"
                " this broker: what it holds cannot be told apart by name (move it by hand)\n"
            )
    out.flush()
