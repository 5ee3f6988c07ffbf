"""The broker names of actors' queues, for every process that needs them: the transport, the
operator (KEDA's trigger), `asya status` and `asya migrate-queues`.

An actor's queue is `asya.{namespace}.{actor}`, its retry delay queues
`asya.{namespace}.{actor}.retry-{ms}ms`. Namespaces and actors are DNS-1123 labels, which never
hold a `.`, so no two (namespace, actor) pairs share a queue: `ml`'s actor `a-x` and `ml-a`'s
actor `x` are `asya.ml.a-x` and `asya.ml-a.x`. Names were once `asya-{namespace}-{actor}`, where
those two met (`legacy_queue_name`); `asya migrate-queues` moves what such queues still hold.
"""

from __future__ import annotations


def queue_name(namespace: str, actor: str) -> str:
    """The broker queue of `actor` in `namespace`: `asya.{namespace}.{actor}` (no other pair
    of names has it: neither holds a `.`)."""
    return f"asya.{namespace}.{actor}"


def delay_queue_name(namespace: str, actor: str, delay_ms: int) -> str:
    """The queue a retry of `actor` waits `delay_ms` in: `asya.{namespace}.{actor}.retry-{ms}ms`."""
    return f"{queue_name(namespace, actor)}.retry-{delay_ms}ms"


def legacy_queue_name(namespace: str, actor: str) -> str:
    """The name `actor`'s queue had before names were told apart by `.`:
    `asya-{namespace}-{actor}` (what `asya migrate-queues` moves from)."""
    return f"asya-{namespace}-{actor}"


def legacy_delay_queue_name(namespace: str, actor: str, delay_ms: int) -> str:
    """A retry delay queue's name before names were told apart by `.`."""
    return f"{legacy_queue_name(namespace, actor)}-retry-{delay_ms}ms"


def legacy_readings(namespace: str, legacy_queue: str) -> list[str]:
    """The other namespaces whose legacy queue `legacy_queue` (a legacy name of `namespace`'s)
    may also be: `asya-ml-a-x` was namespace `ml`'s actor `a-x` as much as `ml-a`'s actor `x`
    (or a delay queue of `ml-a-x`'s). What such a queue holds cannot be told apart by name."""
    prefix = legacy_queue_name(namespace, "")
    if not legacy_queue.startswith(prefix):
        return []
    rest = legacy_queue[len(prefix) :]
    return [
        f"{namespace}-{rest[:at]}"
        for at, char in enumerate(rest)
        if char == "-" and 0 < at < len(rest) - 1
    ]
