"""`asya status`: one table of a pipeline's actors, their queues and replicas, and why.

Reads one of three sources and hands what it read to `asya.status`, which joins and renders:
- a broker namespace (the default): every actor queue of the namespace from RabbitMQ's
  management API (ready, unacked, consumers); when the API cannot be reached, the ready counts
  of the actors named by --actors (and the end actors) by AMQP passive declare, said in a note;
- a running `asya serve` (`--from http://host:port`): its `GET /status` on the health port;
- a cluster (`--kubernetes`): AsyncActors, ActorGroups and pods through the official client
  (the `operator` extra), joined with each namespace's queues from the management URL of its
  broker Secret when readable (or from --broker).
`--watch` redraws every --interval seconds until SIGINT (130) or SIGTERM (143).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Coroutine, Iterable, Mapping
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any, Final

import msgspec

from asya import event_loop, typeinfo
from asya.broker_identity import reach_notes
from asya.cli.options import EXIT_OK, broker_transport, seconds
from asya.cli.results import until_signal
from asya.errors import SettingsError, TransportError
from asya.routing import ERROR_END, HAPPY_END
from asya.settings import Settings, env_var
from asya.status import (
    QueueCounts,
    Report,
    Row,
    ServeStatus,
    Source,
    encode_report,
    format_table,
    management_url_of,
    rows_from_cluster,
    rows_from_queues,
    rows_from_serve,
    secret_value,
    stranded_notes,
    vhost_of,
    without_credentials,
)

if TYPE_CHECKING:
    from asya.cli.options import Subparsers

GROUP: Final = "asya.sh"
VERSION: Final = "v1alpha1"
BROKER_SECRET: Final = "asya-broker"
MANAGEMENT_URL_KEY: Final = "management-url"
"""The broker Secret's key for the management API URL, as the operator's CRD documents it."""
HTTP_TIMEOUT_S: Final = 10.0
_CLEAR: Final = "\x1b[H\x1b[2J"

Gather = Callable[[], Coroutine[Any, Any, Report]]


def add_parser(commands: Subparsers) -> None:
    status = commands.add_parser(
        "status",
        help="one table of a pipeline's actors: queues, replicas, and why (like squeue)",
        description=(
            "Show each actor's queue (ready, unacked), what is in flight, its replicas"
            " (desired, admitted, ready), pool and priority, and in words why the numbers"
            " differ. Reads a broker namespace (default), a running asya serve (--from) or a"
            " cluster (--kubernetes). Exit code: 0 shown; 2 bad usage or a source that cannot"
            " be read; 130 or 143 when --watch is stopped by SIGINT or SIGTERM."
        ),
    )
    source = status.add_mutually_exclusive_group()
    source.add_argument(
        "--from",
        dest="serve_url",
        metavar="URL",
        help="a running asya serve's health port, e.g. http://127.0.0.1:8081",
    )
    source.add_argument(
        "--kubernetes", action="store_true", help="AsyncActors and ActorGroups of a cluster"
    )
    status.add_argument(
        "--broker", metavar="URL", help=f"AMQP URL of RabbitMQ (default: {env_var('broker_url')})"
    )
    status.add_argument(
        "-n",
        "--namespace",
        help="queue namespace (default: ASYA_NAMESPACE); with --kubernetes the Kubernetes"
        " namespace, as kubectl's -n (default: the context's)",
    )
    status.add_argument(
        "--management-url",
        metavar="URL",
        help="RabbitMQ management API with credentials (default: the broker's host, port"
        " 15672, same credentials and vhost)",
    )
    status.add_argument(
        "--actors",
        metavar="A,B",
        help="actors to read by AMQP when the management API cannot be reached",
    )
    status.add_argument("--context", help="kubeconfig context (with --kubernetes)")
    status.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="every namespace (with --kubernetes)",
    )
    status.add_argument("--watch", action="store_true", help="redraw until Ctrl-C")
    status.add_argument(
        "--interval", type=seconds, default=2.0, metavar="S", help="seconds between redraws (2)"
    )
    status.add_argument(
        "-o",
        "--output",
        choices=["table", "json"],
        default="table",
        help="table (default) or json (one object per line; docs/status.md)",
    )
    status.set_defaults(run=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """`asya status`; see the parser's description.

    Raises:
        SettingsError: options that do not go together, a missing extra, a source unreachable.
        TransportError: the broker cannot be read at all.
    """
    if (args.context or args.all_namespaces) and not args.kubernetes:
        raise SettingsError(
            "--context and --all-namespaces read a cluster: add --kubernetes",
            variable="--kubernetes",
            value=None,
        )
    gather = source_of(args, settings)
    main = _show(gather, args, sys.stdout)
    return event_loop.run(until_signal(main), settings.process.event_loop)


async def _show(gather: Gather, args: argparse.Namespace, out: IO[str]) -> int:
    clear = args.watch and args.output == "table" and out.isatty()
    while True:
        report = await gather()
        text = (
            encode_report(report).decode() + "\n" if args.output == "json" else format_table(report)
        )
        out.write((_CLEAR if clear else "") + text)
        out.flush()
        if not args.watch:
            return EXIT_OK
        await asyncio.sleep(args.interval)
        if not clear and args.output == "table":
            out.write("\n")


def source_of(args: argparse.Namespace, settings: Settings) -> Gather:
    if args.serve_url is not None:
        return lambda: read_serve(args.serve_url)
    if args.kubernetes:
        cluster = _Cluster(args, settings)
        return cluster.read
    url = args.broker or settings.transport.url
    if url is None:
        raise SettingsError(
            f"asya status reads a broker: give --broker URL or set {env_var('broker_url')}"
            " (or --from URL, or --kubernetes)",
            variable="--broker",
            value=None,
        )
    namespace = args.namespace or settings.transport.namespace
    management = args.management_url or management_url_of(url)
    actors = [a.strip() for a in (args.actors or "").split(",") if a.strip()]
    return lambda: read_broker(url, namespace, management, actors, settings)


def _now() -> datetime:
    return datetime.now(UTC)


# --- the broker -----------------------------------------------------------------------------


async def read_broker(
    url: str, namespace: str, management: str, actors: Iterable[str], settings: Settings
) -> Report:
    """A broker namespace's actors, from the management API or else by AMQP (ready only).

    Raises:
        TransportError: neither the management API nor the broker can be read.
    """
    origin = f"{without_credentials(url)} namespace {namespace}"
    try:
        queues = await read_queues(management)
    except TransportError as exc:
        rows = await _read_by_amqp(url, namespace, actors, settings)
        note = (
            f"management API not reachable ({exc}): queued counts by AMQP passive declare for"
            f" {', '.join(r.name for r in rows)}; unacked unknown (give --management-url, or"
            " --actors for more actors)"
        )
        return Report(source=Source.BROKER, origin=origin, taken_at=_now(), rows=rows, notes=[note])
    rows = rows_from_queues(namespace, queues)
    reach = await read_reach(management)
    notes = [
        *notes_on_reach(namespace, management, queues, reach),
        *stranded_notes(namespace, queues),
    ]
    return Report(source=Source.BROKER, origin=origin, taken_at=_now(), rows=rows, notes=notes)


async def read_queues(management: str) -> dict[str, QueueCounts]:
    """Every queue of the management URL's vhost, by name.

    Raises:
        TransportError: the API cannot be reached, refuses the credentials, or answers oddly.
    """
    vhost = urllib.parse.quote(vhost_of(management), safe="")
    body = await _api_get(
        management,
        f"/api/queues/{vhost}",
        "columns=name,messages_ready,messages_unacknowledged,consumers",
    )
    try:
        listed = msgspec.json.decode(body, type=list[dict[str, Any]])
    except msgspec.DecodeError as exc:
        raise TransportError(f"the management API answered no queue list: {exc}") from exc
    return {
        str(q["name"]): QueueCounts(
            ready=int(q.get("messages_ready") or 0),
            unacked=int(q.get("messages_unacknowledged") or 0),
            consumers=int(q.get("consumers") or 0),
        )
        for q in listed
    }


class Reach(msgspec.Struct, frozen=True, kw_only=True):
    """Who the management URL's credential is, and which vhosts it may open."""

    user: str
    tags: list[str]
    vhosts: list[str]


class _Whoami(msgspec.Struct):
    name: str
    tags: list[str] | str = []
    """A list from RabbitMQ 3.9 on; a comma-separated string before."""


class _Vhost(msgspec.Struct):
    name: str


async def read_reach(management: str) -> Reach | None:
    """The management URL's user, its tags and the vhosts it may open (GET /api/whoami and
    /api/vhosts); None when the API does not say (what it reaches is then not shown)."""
    try:
        whoami = msgspec.json.decode(await _api_get(management, "/api/whoami"), type=_Whoami)
        vhosts = msgspec.json.decode(
            await _api_get(management, "/api/vhosts", "columns=name"), type=list[_Vhost]
        )
    except (TransportError, msgspec.DecodeError):
        return None
    tags = whoami.tags.split(",") if isinstance(whoami.tags, str) else whoami.tags
    return Reach(user=whoami.name, tags=[t for t in tags if t], vhosts=[v.name for v in vhosts])


def notes_on_reach(
    namespace: str, management: str, queues: Iterable[str], reach: Reach | None
) -> list[str]:
    """`asya.broker_identity.reach_notes` for what `read_queues` and `read_reach` read."""
    return reach_notes(
        namespace,
        vhost_of(management),
        queues,
        vhosts=None if reach is None else reach.vhosts,
        tags=None if reach is None else reach.tags,
        user=None if reach is None else reach.user,
    )


async def _api_get(management: str, path: str, query: str = "") -> bytes:
    """GET `path` of the management API at `management`, with its credentials.

    Raises:
        TransportError: the API cannot be reached or refuses.
    """
    parts = urllib.parse.urlsplit(management)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    api = urllib.parse.urlunsplit((parts.scheme, netloc, path, query, ""))
    request = urllib.request.Request(api)
    if parts.username is not None:
        request.add_unredirected_header("Authorization", _basic(parts))
    return await asyncio.to_thread(_get, request, without_credentials(management))


def _basic(parts: urllib.parse.SplitResult) -> str:
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _get(request: urllib.request.Request, shown: str) -> bytes:
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            body: bytes = response.read()
            return body
    except urllib.error.HTTPError as exc:
        raise TransportError(f"{shown} answered {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise TransportError(f"cannot reach {shown}: {exc}") from exc


async def _read_by_amqp(
    url: str, namespace: str, actors: Iterable[str], settings: Settings
) -> list[Row]:
    names = list(dict.fromkeys([*actors, HAPPY_END, ERROR_END]))
    transport = broker_transport(url, namespace, settings, name="asya-status")
    rows = []
    async with transport:
        for name in names:
            try:
                depth = await transport.depth(name)
            except TransportError as exc:
                rows.append(Row(namespace=namespace, name=name, why=f"no queue ({exc})"))
                continue
            rows.append(Row(namespace=namespace, name=name, queued=depth.ready))
    return rows


# --- a running asya serve ---------------------------------------------------------------------


async def read_serve(url: str) -> Report:
    """A running `asya serve`'s actors, from `GET /status` on its health port.

    Raises:
        SettingsError: nothing answers there, or what answers is not an `asya serve`.
    """
    endpoint = url.rstrip("/") + "/status"
    try:
        body = await asyncio.to_thread(_get, urllib.request.Request(endpoint), endpoint)
        status = typeinfo.decode_json(body, ServeStatus)
    except (TransportError, msgspec.DecodeError) as exc:
        raise SettingsError(
            f"cannot read the status of asya serve at {endpoint}: {exc}; is it running with"
            " --health-port?",
            variable="--from",
            value=url,
        ) from exc
    return Report(
        source=Source.SERVE,
        origin=f"{url} ({status.state})",
        taken_at=_now(),
        rows=rows_from_serve(status),
        notes=[
            f"finals: {status.finals_succeeded} succeeded, {status.finals_failed} failed"
            " (in this process)"
        ],
    )


# --- a cluster ----------------------------------------------------------------------------------


class _Cluster:
    """The cluster source: the client made once, each `read` one round of listing."""

    def __init__(self, args: argparse.Namespace, settings: Settings) -> None:
        try:
            import kubernetes
        except ImportError as exc:
            raise SettingsError(
                f"--kubernetes needs the Kubernetes client: pip install 'asya[operator]' ({exc})",
                variable="--kubernetes",
                value=None,
            ) from exc
        self._kubernetes = kubernetes
        try:
            kubernetes.config.load_kube_config(context=args.context)  # type: ignore[no-untyped-call]
            contexts, active = kubernetes.config.list_kube_config_contexts()  # type: ignore[no-untyped-call]
        except (kubernetes.config.ConfigException, OSError) as exc:
            raise SettingsError(
                f"cannot load the kubeconfig (context {args.context or 'current'}): {exc}",
                variable="--context",
                value=args.context,
            ) from exc
        chosen = next((c for c in contexts if c["name"] == args.context), active)
        self._context = str(chosen["name"])
        self._namespace: str | None = None
        if not args.all_namespaces:
            self._namespace = args.namespace or chosen["context"].get("namespace") or "default"
        self._broker = args.broker
        self._management = args.management_url
        self._api = kubernetes.client.ApiClient()

    async def read(self) -> Report:
        """One round: list, read each namespace's queues, join."""
        actors, groups, pods, problems = await asyncio.to_thread(self._list)
        namespaces = sorted({a["metadata"].get("namespace") or "" for a in actors})
        queues: dict[str, dict[str, QueueCounts]] = {}
        notes = list(problems)
        for namespace in namespaces:
            management, problem = await self._management_of(namespace, actors)
            if management is None:
                notes.append(f"namespace {namespace}: queue depths unknown: {problem}")
                continue
            try:
                queues[namespace] = await read_queues(management)
            except TransportError as exc:
                notes.append(f"namespace {namespace}: queue depths unknown: {exc}")
                continue
            reach = await read_reach(management)
            notes += [
                f"namespace {namespace}: {n}"
                for n in [
                    *notes_on_reach(namespace, management, queues[namespace], reach),
                    *stranded_notes(namespace, queues[namespace]),
                ]
            ]
        where = "all namespaces" if self._namespace is None else f"namespace {self._namespace}"
        return Report(
            source=Source.KUBERNETES,
            origin=f"context {self._context}, {where}",
            taken_at=_now(),
            rows=rows_from_cluster(actors, groups, pods, queues),
            notes=notes,
        )

    def _list(
        self,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], list[str]]:
        custom = self._kubernetes.client.CustomObjectsApi(self._api)
        core = self._kubernetes.client.CoreV1Api(self._api)
        problems: list[str] = []

        def listed(plural: str) -> list[dict[str, Any]]:
            found: dict[str, Any]
            if self._namespace is None:
                found = custom.list_cluster_custom_object(GROUP, VERSION, plural)  # type: ignore[assignment]
            else:
                found = custom.list_namespaced_custom_object(  # type: ignore[assignment]
                    GROUP, VERSION, self._namespace, plural
                )
            return list(found["items"])

        try:
            actors = listed("asyncactors")
        except self._kubernetes.client.ApiException as exc:
            raise SettingsError(
                f"cannot list AsyncActors in context {self._context}: {exc.status} {exc.reason}"
                " (is the asya operator's CRD installed, and may you list it?)",
                variable="--kubernetes",
                value=self._context,
            ) from exc
        except OSError as exc:  # urllib3's connection errors are OSErrors
            raise SettingsError(
                f"cannot reach the cluster of context {self._context}: {exc}",
                variable="--kubernetes",
                value=self._context,
            ) from exc
        try:
            groups = listed("actorgroups")
        except self._kubernetes.client.ApiException as exc:
            groups = []
            problems.append(f"ActorGroups not listed: {exc.status} {exc.reason}")
        try:
            if self._namespace is None:
                pod_list = core.list_pod_for_all_namespaces()
            else:
                pod_list = core.list_namespaced_pod(self._namespace)
            as_dict = self._api.sanitize_for_serialization(pod_list)  # type: ignore[no-untyped-call]
            pods = list(as_dict["items"])
        except self._kubernetes.client.ApiException as exc:
            pods = []
            problems.append(f"pods not listed ({exc.status} {exc.reason}): crash loops unseen")
        return actors, groups, pods, problems

    async def _management_of(
        self, namespace: str, actors: Iterable[Mapping[str, Any]]
    ) -> tuple[str | None, str]:
        if self._management is not None:
            return self._management, ""
        if self._broker is not None:
            return management_url_of(self._broker), ""
        secret_names = {
            ((a.get("spec") or {}).get("broker") or {}).get("secretName") or BROKER_SECRET
            for a in actors
            if a["metadata"].get("namespace") == namespace
        }
        name = sorted(secret_names)[0]
        core = self._kubernetes.client.CoreV1Api(self._api)
        try:
            found = await asyncio.to_thread(core.read_namespaced_secret, name, namespace)
        except self._kubernetes.client.ApiException as exc:
            return None, f"Secret {namespace}/{name} not readable ({exc.status} {exc.reason})"
        as_dict = self._api.sanitize_for_serialization(found)  # type: ignore[no-untyped-call]
        url = secret_value(as_dict, MANAGEMENT_URL_KEY)
        if url is None:
            return None, f"Secret {namespace}/{name} has no key {MANAGEMENT_URL_KEY}"
        return url, ""
