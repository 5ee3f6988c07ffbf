"""What `asya status` shows: one row per actor (or group), and why its numbers differ.

Pure: what a source saw goes in (a broker's queues, a running `asya serve`'s `/status`, the
AsyncActors and ActorGroups of a cluster as plain API dicts), rows, a table and JSON come out.
No sockets, no clock (the time a report was taken is an input), no environment. The reading
is `asya.cli.status`'s; `asya.local.serve` builds the `ServeStatus` it answers `/status` with.
The JSON schema is `Report` (docs/status.md); `SCHEMA_VERSION` changes when a field does.
"""

from __future__ import annotations

import base64
import enum
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import msgspec

from asya.queue_names import legacy_queue_name, queue_name

SCHEMA_VERSION: Final = 1
"""Version of `Report` and `ServeStatus` as JSON; bumped when a field changes meaning."""

MANAGEMENT_PORT: Final = 15672
"""Where RabbitMQ's management API listens beside the broker, unless told otherwise."""

_RETRY: Final = "retry-"
# The operator's condition of an admitted actor or group whose flavor's nodes advertise none
# of an accelerator it asks for (True only while so; its message names the flavor).
_NO_ACCELERATORS: Final = "AcceleratorsUnavailable"
_ROOT_VHOST: Final = "/"
# A container waiting for one of these is not coming up by itself: the row says so.
_STUCK_WAITING: Final = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "InvalidImageName",
    }
)


class Source(enum.StrEnum):
    """Where a report's numbers come from."""

    BROKER = "broker"
    SERVE = "serve"
    KUBERNETES = "kubernetes"


class Kind(enum.StrEnum):
    ACTOR = "actor"
    GROUP = "group"
    """An ActorGroup: gang instances admitted whole; its queue is its entry (first) member's."""


# --- what a running `asya serve` answers on GET /status ------------------------------------


class ActorActivity(msgspec.Struct, frozen=True, kw_only=True):
    """One actor of a running `asya serve`, as that process sees it."""

    name: str
    workers: int
    """Workers running now (the mesh scales them by queue depth)."""
    queued: int | None
    """Messages ready in the actor's queue as the broker counts them; None: not readable."""
    in_flight: int
    """Messages this process took and has not settled yet (other processes' are not here)."""
    processed: int
    failed: int


class ServeStatus(msgspec.Struct, frozen=True, kw_only=True):
    """`GET /status` of `asya serve`: its state and its actors (end actors included if run)."""

    version: int = SCHEMA_VERSION
    state: str
    """starting, running, draining or stopped."""
    actors: list[ActorActivity]
    finals_succeeded: int
    finals_failed: int


# --- the report -----------------------------------------------------------------------------


class QueueCounts(msgspec.Struct, frozen=True, kw_only=True):
    """One queue as the broker counts it; None where the way it was read cannot tell."""

    ready: int
    unacked: int | None = None
    consumers: int | None = None


class Row(msgspec.Struct, frozen=True, kw_only=True):
    """One actor or group. None: the source cannot tell (shown as `-`)."""

    namespace: str | None = None
    name: str
    kind: Kind = Kind.ACTOR
    queued: int | None = None
    """Messages ready in the actor's queue."""
    unacked: int | None = None
    """Messages delivered by the broker and not settled yet (every consumer's)."""
    retrying: int | None = None
    """Messages waiting out a retry delay in the actor's delay queues."""
    in_flight: int | None = None
    """Messages a running `asya serve` took and has not settled yet."""
    consumers: int | None = None
    desired: int | None = None
    """Replicas (or workers, or gang instances) wanted."""
    admitted: int | None = None
    """Replicas holding quota in the pool (actors with a pool)."""
    ready: int | None = None
    """Replicas (or workers) up and ready."""
    pool: str | None = None
    priority: int | None = None
    processed: int | None = None
    failed: int | None = None
    why: str = ""
    """Why the numbers are as they are, in words; empty when nothing needs explaining."""


class Report(msgspec.Struct, frozen=True, kw_only=True):
    """What `asya status -o json` prints (one object per refresh with --watch)."""

    version: int = SCHEMA_VERSION
    source: Source
    origin: str
    """What was read: a broker namespace, a serve URL, a cluster context (no credentials)."""
    taken_at: datetime
    rows: list[Row]
    notes: list[str] = msgspec.field(default_factory=list)
    """What the table cannot show: a source that was not readable, a fallback taken."""


# --- the broker -----------------------------------------------------------------------------


def management_url_of(amqp_url: str) -> str:
    """The management API beside an AMQP broker: same host and credentials, port 15672."""
    amqp = urllib.parse.urlsplit(amqp_url)
    auth = ""
    if amqp.username:
        auth = f"{amqp.username}:{amqp.password or ''}@"
    return f"http://{auth}{amqp.hostname}:{MANAGEMENT_PORT}{amqp.path or '/'}"


def vhost_of(url: str) -> str:
    """The virtual host a broker or management URL names (its path; `/` when none)."""
    path = urllib.parse.urlsplit(url).path
    if path in ("", "/"):
        return _ROOT_VHOST
    return urllib.parse.unquote(path[1:])


def without_credentials(url: str) -> str:
    """`url` with its password hidden, for tables, notes and messages."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def actor_of_queue(namespace: str, queue: str) -> tuple[str, bool] | None:
    """The actor a queue of `namespace` belongs to, and whether it is one of its retry delay
    queues; None for other queues (parking, replies, record streams, other namespaces).

    `asya.{namespace}.{actor}` and `asya.{namespace}.{actor}.retry-{ms}ms`, as the RabbitMQ
    transport names them (`asya.transport.base`): no `.` in a namespace or an actor, so a
    queue belongs to one namespace only.
    """
    prefix = queue_name(namespace, "")
    if not queue.startswith(prefix):
        return None
    actor, dot, tail = queue[len(prefix) :].partition(".")
    if not actor:
        return None
    if not dot:
        return actor, False
    if tail.startswith(_RETRY) and tail.endswith("ms") and tail[len(_RETRY) : -2].isdigit():
        return actor, True
    return None


def rows_from_queues(namespace: str, queues: Mapping[str, QueueCounts]) -> list[Row]:
    """One row per actor with a queue in `namespace`, from the broker's queues by name."""
    own: dict[str, QueueCounts] = {}
    retrying: dict[str, int] = {}
    for name, counts in queues.items():
        found = actor_of_queue(namespace, name)
        if found is None:
            continue
        actor, is_delay = found
        if is_delay:
            retrying[actor] = retrying.get(actor, 0) + counts.ready
        else:
            own[actor] = counts
    rows = []
    for actor in sorted(own):
        counts = own[actor]
        row = Row(
            namespace=namespace,
            name=actor,
            queued=counts.ready,
            unacked=counts.unacked,
            consumers=counts.consumers,
            retrying=retrying.get(actor, 0) if counts.unacked is not None else None,
        )
        rows.append(msgspec.structs.replace(row, why=_why_on_broker(row)))
    return rows


def stranded_notes(namespace: str, queues: Mapping[str, QueueCounts]) -> list[str]:
    """A note for each queue of `namespace`'s old names (`asya-{namespace}-{actor}`, and its
    delay queues) that still holds messages: nothing consumes them under that name, and the
    actor's row cannot show them. A `.` is in every name of today's (parking, streams, replies)
    and in none of the old ones."""
    prefix = legacy_queue_name(namespace, "")
    notes = []
    for name in sorted(queues):
        counts = queues[name]
        held = counts.ready + (counts.unacked or 0)
        if name.startswith(prefix) and "." not in name and held > 0:
            notes.append(
                f"queue {name}, of the old names, holds {held} message(s) that no actor of"
                f" today's names reads: move them with asya migrate-queues --namespace {namespace}"
            )
    return notes


def _why_on_broker(row: Row) -> str:
    waiting = row.queued or 0
    if row.consumers == 0:
        return f"no consumer: {waiting} waiting" if waiting else "idle: no consumer"
    if row.retrying:
        return f"{row.retrying} waiting to retry"
    return ""


# --- a running `asya serve` ------------------------------------------------------------------


def rows_from_serve(status: ServeStatus) -> list[Row]:
    """One row per actor a running `asya serve` serves."""
    rows = []
    for actor in status.actors:
        row = Row(
            name=actor.name,
            queued=actor.queued,
            in_flight=actor.in_flight,
            desired=actor.workers,
            ready=actor.workers,
            processed=actor.processed,
            failed=actor.failed,
        )
        rows.append(msgspec.structs.replace(row, why=_why_in_serve(status.state, row)))
    return rows


def _why_in_serve(state: str, row: Row) -> str:
    if state != "running":
        return f"service {state}"
    if row.desired == 0:
        if row.queued:
            return f"scaling up: {row.queued} queued, no worker yet"
        return "scaled to zero: queue idle"
    return ""


# --- a cluster ------------------------------------------------------------------------------


def secret_value(secret: Mapping[str, Any], key: str) -> str | None:
    """A key of a Secret as the API returns it (base64 in `data`), decoded; None if absent."""
    encoded = (secret.get("data") or {}).get(key)
    if encoded is None:
        return None
    return base64.b64decode(encoded).decode()


def rows_from_cluster(
    actors: Iterable[Mapping[str, Any]],
    groups: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    queues: Mapping[str, Mapping[str, QueueCounts]],
) -> list[Row]:
    """Rows for AsyncActors and ActorGroups as the API returns them, with their pods'
    troubles and, by namespace, the broker's queues (a namespace missing: depths unknown)."""
    pod_list = list(pods)
    rows = []
    for body in actors:
        namespace = body["metadata"].get("namespace")
        counts = queues.get(namespace or "", {}).get(
            queue_name(namespace or "", body["metadata"]["name"])
        )
        rows.append(_actor_row(body, pod_list, counts))
    for body in groups:
        namespace = body["metadata"].get("namespace")
        members = (body.get("spec") or {}).get("members") or [{}]
        entry = queue_name(namespace or "", f"{body['metadata']['name']}-{members[0].get('name')}")
        rows.append(_group_row(body, queues.get(namespace or "", {}).get(entry)))
    return sorted(rows, key=lambda r: (r.namespace or "", r.kind != Kind.ACTOR, r.name))


def _actor_row(
    body: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], counts: QueueCounts | None
) -> Row:
    meta, spec = body["metadata"], body.get("spec") or {}
    status = body.get("status") or {}
    desired = spec.get("replicas")
    if desired is None:
        desired = (spec.get("scaling") or {}).get("minReplicas")
    pool = spec.get("pool")
    row = Row(
        namespace=meta.get("namespace"),
        name=meta["name"],
        queued=None if counts is None else counts.ready,
        unacked=None if counts is None else counts.unacked,
        consumers=None if counts is None else counts.consumers,
        desired=desired,
        admitted=status.get("admittedReplicas") if pool else None,
        ready=status.get("readyReplicas", 0 if status else None),
        pool=pool,
        priority=spec.get("priority") if pool else None,
    )
    conditions = {c.get("type"): c for c in status.get("conditions") or ()}
    stuck = _stuck_container(pods, meta.get("namespace"), status.get("selector"))
    return msgspec.structs.replace(row, why=_why_on_cluster(row, conditions, stuck))


def _why_on_cluster(
    row: Row, conditions: Mapping[str, Mapping[str, Any]], stuck: str | None
) -> str:
    def holds(kind: str, value: str = "True") -> str | None:
        condition = conditions.get(kind)
        if condition is None or condition.get("status") != value:
            return None
        return str(condition.get("message") or condition.get("reason") or kind)

    if not conditions and stuck is None:
        return "not reconciled yet: no status from the operator"
    degraded = holds("Degraded")
    if degraded is not None:
        return degraded
    if stuck is not None:
        return stuck
    # Admitted, yet its pods cannot start: its flavor's nodes advertise no accelerator.
    unplaced = holds(_NO_ACCELERATORS)
    if unplaced is not None:
        return unplaced
    preempted = holds("Preempted")
    if preempted is not None:
        return preempted
    pending = holds("Admitted", "False") if row.pool else None
    if pending is not None and row.desired:
        return f"waiting for quota: {pending}"
    if row.desired == 0:
        if row.queued:
            return f"scaled to zero: {row.queued} queued, waiting for the scaler"
        return "scaled to zero: queue idle"
    not_ready = holds("Ready", "False")
    if not_ready is not None:
        return not_ready
    scaling = holds("Scaling")
    return scaling or ""


def _stuck_container(
    pods: Sequence[Mapping[str, Any]], namespace: str | None, selector: str | None
) -> str | None:
    if not selector:
        return None
    wanted = dict(part.split("=", 1) for part in selector.split(",") if "=" in part)
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if meta.get("namespace") != namespace or any(labels.get(k) != v for k, v in wanted.items()):
            continue
        for container in (pod.get("status") or {}).get("containerStatuses") or ():
            waiting = (container.get("state") or {}).get("waiting") or {}
            reason = waiting.get("reason")
            if reason in _STUCK_WAITING:
                restarts = container.get("restartCount", 0)
                detail = waiting.get("message") or ""
                said = f": {detail}" if detail else ""
                return (
                    f"container {container.get('name')} of pod {meta.get('name')}: {reason}"
                    f" ({restarts} restarts){said}"
                )
    return None


def _group_row(body: Mapping[str, Any], counts: QueueCounts | None) -> Row:
    """An ActorGroup: its instances (desired, admitted, ready), its entry member's queue, and
    why the numbers differ, from its conditions."""
    meta, spec = body["metadata"], body.get("spec") or {}
    status = body.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or ()}

    def holds(kind: str, value: str = "True") -> str | None:
        condition = conditions.get(kind)
        if condition is None or condition.get("status") != value:
            return None
        return str(condition.get("message") or condition.get("reason") or kind)

    if not conditions:
        why = "not reconciled yet: no status from the operator"
    else:
        why = (
            holds("Degraded")
            or holds(_NO_ACCELERATORS)
            or holds("Preempted")
            or holds("Evicted")
            or _prefixed("waiting for quota: ", holds("Admitted", "False"))
            or holds("PodsReady", "False")
            or ""
        )
    return Row(
        namespace=meta.get("namespace"),
        name=meta["name"],
        kind=Kind.GROUP,
        queued=None if counts is None else counts.ready,
        unacked=None if counts is None else counts.unacked,
        consumers=None if counts is None else counts.consumers,
        desired=status.get("desired", spec.get("replicas")),
        admitted=status.get("admitted"),
        ready=status.get("ready"),
        pool=spec.get("pool"),
        priority=spec.get("priority"),
        why=why,
    )


def _prefixed(prefix: str, text: str | None) -> str | None:
    return None if text is None else prefix + text


# --- rendering --------------------------------------------------------------------------------

# (heading, field): a column is shown when some row has a value for it; NAME and WHY always.
_COLUMNS: Final = (
    ("QUEUED", "queued"),
    ("UNACKED", "unacked"),
    ("RETRYING", "retrying"),
    ("INFLIGHT", "in_flight"),
    ("CONSUMERS", "consumers"),
    ("DESIRED", "desired"),
    ("ADMITTED", "admitted"),
    ("READY", "ready"),
    ("POOL", "pool"),
    ("PRIO", "priority"),
    ("PROCESSED", "processed"),
    ("FAILED", "failed"),
)


def format_table(report: Report) -> str:
    """The report as a table: one line per row, `-` for unknown, notes as a footer."""
    columns = [(h, f) for h, f in _COLUMNS if any(getattr(r, f) is not None for r in report.rows)]
    many_namespaces = len({r.namespace for r in report.rows}) > 1
    headings = (["NAMESPACE"] if many_namespaces else []) + ["NAME"] + [h for h, _ in columns]
    lines = []
    for row in report.rows:
        name = row.name if row.kind is Kind.ACTOR else f"{row.name} (group)"
        cells = ([row.namespace or "-"] if many_namespaces else []) + [name]
        cells += ["-" if getattr(row, f) is None else str(getattr(row, f)) for _, f in columns]
        lines.append(cells)
    widths = [max(len(c) for c in column) for column in zip(headings, *lines, strict=False)]
    out = [_line([*headings, "WHY"], widths)]
    out += [_line([*cells, row.why], widths) for cells, row in zip(lines, report.rows, strict=True)]
    if not report.rows:
        out.append("(no actors)")
    out += [f"note: {note}" for note in report.notes]
    return "\n".join(out) + "\n"


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    padded = [cell.ljust(width) for cell, width in zip(cells, widths, strict=False)]
    return "  ".join([*padded, *cells[len(widths) :]]).rstrip()


def encode_report(report: Report) -> bytes:
    """The report as one line of JSON (the schema of docs/status.md)."""
    return msgspec.json.encode(report)
