"""`asya clean`: delete a broker namespace's queues and streams, once nothing uses them.

`asya serve` never deletes a queue (the namespace is shared, and several processes may serve
it); this is the command that does, when the namespace is done with. It reads, then asks, then
deletes: it lists the queues of APP's actors (and `--actors`) that exist in the namespace, with
what they hold, refuses while any has a consumer attached (naming them), asks for confirmation
(`--yes` for scripts) and deletes, checking each queue again just before it goes. Which queues
are the namespace's is `asya.transport.rabbitmq_namespace`'s.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

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
from asya.settings import Settings
from asya.status import without_credentials

if TYPE_CHECKING:
    from asya.cli.options import Subparsers
    from asya.transport.rabbitmq_namespace import QueueState


def add_parser(commands: Subparsers) -> None:
    clean = commands.add_parser(
        "clean",
        help="delete a namespace's queues and streams on the broker (after asya serve)",
        description=(
            "Delete the queues of APP's actors (and of --actors) in --namespace on the broker:"
            " each actor's queue and retry delay queues, happy-end's and error-end's, the"
            " parking queue and the results, failures and replays streams, with the messages"
            " they hold. Lists what it will delete and asks first (--yes: do not ask). Refuses,"
            " naming them, while consumers are attached to any of them: stop asya serve, the"
            " actors' pods and asya results --follow first. Queues are found by name, never by"
            " prefix, and no name is two namespaces' (asya.NAMESPACE.ACTOR): another"
            " namespace's queues are not touched. Exit"
            " code: 0 deleted, or nothing to delete; 1 refused, not confirmed, or a consumer"
            " attached meanwhile (those queues are kept); 2 bad usage or a broker that cannot"
            " be reached."
        ),
    )
    add_namespace_queues(
        clean,
        actors="actors whose queues to delete too (ones since removed from APP), or without APP",
        namespace_help="the namespace to delete (required: deleting is never implied by a default)",
        yes="delete without asking (for scripts)",
    )
    clean.set_defaults(run=run)


@dataclass(frozen=True)
class Plan:
    """What the namespace holds, read before anything is deleted."""

    to_delete: Sequence[QueueState]

    @property
    def busy(self) -> list[QueueState]:
        """The queues to delete that have consumers attached."""
        return [q for q in self.to_delete if q.consumers > 0]


def run(args: argparse.Namespace, settings: Settings) -> int:
    """`asya clean`; see the parser's description.

    Raises:
        SettingsError: no broker or no actor is named, or the RabbitMQ extra is missing.
        ActorDefinitionError: APP cannot be imported.
        TransportError: the broker cannot be reached or refused a read or a delete.
    """
    url, actors = namespace_queues(args, settings, "delete")
    loop = settings.process.event_loop
    plan = event_loop.run(_read(url, args.namespace, actors, settings), loop)
    _show(plan, f"namespace '{args.namespace}' on {without_credentials(url)}", sys.stdout)
    if not plan.to_delete:
        print("asya: nothing to delete", file=sys.stderr)
        return EXIT_OK
    if plan.busy:
        print(
            f"asya: refused, nothing deleted: consumers are attached to {_consumed(plan.busy)};"
            " stop what consumes them (asya serve, the actors' pods, asya results --follow)"
            " and run asya clean again",
            file=sys.stderr,
        )
        return EXIT_FAILURES
    messages = sum(q.messages for q in plan.to_delete)
    question = (
        f"delete these {len(plan.to_delete)} queue(s) and the {messages} message(s) they hold?"
    )
    if not args.yes and not confirmed(question, sys.stdin):
        print("asya: nothing deleted", file=sys.stderr)
        return EXIT_FAILURES
    names = [q.name for q in plan.to_delete]
    deleted, busy = event_loop.run(_delete(url, args.namespace, names, settings), loop)
    print(f"asya: deleted {len(deleted)} queue(s)", file=sys.stderr)
    if busy:
        print(f"asya: kept, a consumer attached meanwhile: {_consumed(busy)}", file=sys.stderr)
        return EXIT_FAILURES
    return EXIT_OK


async def _read(url: str, namespace: str, actors: set[str], settings: Settings) -> Plan:
    async with broker_transport(url, namespace, settings, name="asya-clean") as transport:
        # Imported here, once broker_transport found the RabbitMQ extra: the in-memory
        # commands, in the same `asya` program, must work without it.
        from asya.transport.rabbitmq_namespace import NamespaceQueues, namespace_queue_names

        queues = NamespaceQueues(transport)
        try:
            existing = await queues.states(namespace_queue_names(transport, actors))
        finally:
            await queues.aclose()
    return Plan(to_delete=existing)


async def _delete(
    url: str, namespace: str, names: Sequence[str], settings: Settings
) -> tuple[list[str], list[QueueState]]:
    """Delete each of `names` that has no consumer now; (deleted, kept because consumed)."""
    deleted: list[str] = []
    busy: list[QueueState] = []
    async with broker_transport(url, namespace, settings, name="asya-clean") as transport:
        from asya.transport.rabbitmq_namespace import NamespaceQueues  # as in _read

        queues = NamespaceQueues(transport)
        try:
            for name in names:
                state = await queues.state(name)
                if state is None:
                    continue
                if state.consumers > 0:
                    busy.append(state)
                    continue
                await queues.delete(name)
                deleted.append(name)
        finally:
            await queues.aclose()
    return deleted, busy


def _show(plan: Plan, origin: str, out: IO[str]) -> None:
    if not plan.to_delete:
        out.write(f"{origin}: none of these queues exist\n")
        return
    rows: list[Sequence[str]] = [("queue", "messages", "consumers")]
    rows += [(q.name, str(q.messages), str(q.consumers)) for q in plan.to_delete]
    out.write(f"{origin}:\n")
    out.write("\n".join(aligned(rows)) + "\n")
    out.flush()


def _consumed(queues: Sequence[QueueState]) -> str:
    return ", ".join(f"{q.name} ({q.consumers})" for q in queues)
