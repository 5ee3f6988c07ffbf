"""Arguments several commands share, each parsed in one place."""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, TypeAlias, TypeVar

import msgspec

from asya import typeinfo
from asya.envelope import Envelope, Limits
from asya.errors import SettingsError
from asya.local.discovery import load_app
from asya.settings import Settings, TransportSettings, env_var

EXIT_OK = 0
EXIT_FAILURES = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""SIGINT (Ctrl-C): 128 + 2, as a shell reports a process it interrupted."""
EXIT_TERMINATED = 143
"""SIGTERM: 128 + 15, as a shell (or Kubernetes) reports a process it terminated."""

if TYPE_CHECKING:
    from asya.transport.rabbitmq import RabbitMQTransport

    # argparse has no public name for what add_subparsers returns (nor is it generic at run time).
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def add_route(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument("--route", type=route, help=f"comma-separated actor names: {text}")


def route(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise argparse.ArgumentTypeError("route needs at least one actor name")
    return names


N = TypeVar("N", int, float)


def bounded(
    parse: Callable[[str], N], *, low: N, high: N | None = None, what: str
) -> Callable[[str], N]:
    """An argparse type: a number parsed by `parse`, from `low` to `high` (inclusive)."""

    def convert(text: str) -> N:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'") from None
        if high is not None and not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low}..{high}, got {text}")
        if not low <= value:  # also refuses NaN
            raise argparse.ArgumentTypeError(f"must be {low} or more, got {text}")
        return value

    return convert


positive_int = bounded(int, low=1, what="a whole number")
"""A whole number above zero (0 would disable a limit silently)."""
port = bounded(int, low=0, high=65535, what="a port number")
"""A TCP port; 0 for any free one."""
seconds = bounded(float, low=0.0, what="seconds")
"""Seconds, 0 or more."""


def add_limits(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-payload-bytes",
        type=positive_int,
        metavar="N",
        help="largest encoded payload, 1 or more (default: ASYA_MAX_PAYLOAD_BYTES or 4 MiB)",
    )
    parser.add_argument(
        "--hop-limit",
        type=positive_int,
        metavar="N",
        help="most actors one envelope may visit, 1 or more (default: ASYA_HOP_LIMIT or 64)",
    )


def limits(args: argparse.Namespace, settings: Settings) -> Limits:
    return Limits(
        max_payload_bytes=(
            settings.limits.max_payload_bytes
            if args.max_payload_bytes is None
            else args.max_payload_bytes
        ),
        hop_limit=settings.limits.hop_limit if args.hop_limit is None else args.hop_limit,
    )


def add_broker(parser: argparse.ArgumentParser, *, default_help: str) -> None:
    parser.add_argument(
        "--broker", metavar="URL", help=f"AMQP URL of RabbitMQ (default: {default_help})"
    )
    parser.add_argument(
        "--namespace",
        help="queue namespace on the broker (default: ASYA_NAMESPACE; for asya dev a fresh"
        " one, deleted after the run)",
    )


def broker_transport(
    url: str, namespace: str, settings: Settings, *, name: str
) -> RabbitMQTransport:
    """A transport (not yet connected) for `url` and `namespace`, as the settings say.

    Raises:
        SettingsError: the RabbitMQ extra is not installed.
    """
    try:
        # Imported here: the in-memory commands must work without the rabbitmq extra.
        from asya.transport.rabbitmq import (
            RabbitMQOptions,
            RabbitMQTransport,
        )
    except ImportError as exc:
        raise SettingsError(
            f"--broker needs the RabbitMQ client: pip install 'asya[rabbitmq]' ({exc})",
            variable="--broker",
            value=url,
        ) from exc
    return RabbitMQTransport(
        url,
        RabbitMQOptions.from_settings(
            settings.transport, connection_name=name, namespace=namespace
        ),
    )


def fresh_namespace() -> str:
    return f"dev-{secrets.token_hex(4)}"


def write_line(stream: IO[str], envelope: Envelope) -> None:
    stream.write(msgspec.json.encode(envelope).decode() + "\n")
    stream.flush()


def namespace(text: str) -> str:
    """`--namespace`'s type: a namespace name as the settings accept it."""
    try:
        typeinfo.convert({"namespace": text}, TransportSettings)
    except msgspec.ValidationError as exc:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a namespace: lowercase letters, digits and '-' ({exc})"
        ) from None
    return text


def add_namespace_queues(
    parser: argparse.ArgumentParser, *, actors: str, namespace_help: str, yes: str
) -> None:
    """APP, --actors, --namespace (required), --broker and --yes: the arguments of a command
    that changes a namespace's queues on the broker (`asya clean`, `asya migrate-queues`)."""
    parser.add_argument(
        "app", nargs="?", metavar="APP", help="a folder, a .py file or a module name"
    )
    parser.add_argument("--actors", type=route, metavar="A,B", help=actors)
    parser.add_argument("--namespace", required=True, type=namespace, help=namespace_help)
    parser.add_argument(
        "--broker", metavar="URL", help=f"AMQP URL of RabbitMQ (default: {env_var('broker_url')})"
    )
    parser.add_argument("--yes", action="store_true", help=yes)


def namespace_queues(
    args: argparse.Namespace, settings: Settings, verb: str
) -> tuple[str, set[str]]:
    """The broker URL and the actors (APP's and `--actors`) of `add_namespace_queues`'s
    arguments; `verb` says what the command does to their queues.

    Raises:
        SettingsError: no broker is named, or no actor.
        ActorDefinitionError: APP cannot be imported.
    """
    url = args.broker or settings.transport.url
    if url is None:
        raise SettingsError(
            f"pass --broker URL (or set {env_var('broker_url')})", variable="--broker", value=None
        )
    named = {spec.name for spec in load_app(args.app).specs} if args.app else set()
    named.update(args.actors or ())
    if not named:
        raise SettingsError(
            f"pass APP, or --actors a,b: the actors whose queues to {verb}",
            variable="--actors",
            value=None,
        )
    return url, named


def confirmed(question: str, answers: IO[str]) -> bool:
    """Ask `question` (y/N) on stderr; whether `answers` says yes."""
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    return answers.readline().strip().lower() in ("y", "yes")
