"""One typed settings object per process, built once from `ASYA_*` variables at the entry point.

Small frozen groups, every field with its default and a description (`msgspec.Meta`) on unit
and reason, which code reads: `describe_settings` lists them and each process's `--help` prints
them. Each field is read from `ASYA_<FIELD NAME IN CAPITALS>` (`env_var` builds the name; a test
keeps them unique). `load_settings` parses with msgspec and fails at start naming the variable,
the value and the expected type: never a silent fallback. Nothing else in asya reads
`os.environ`.
"""

from __future__ import annotations

import argparse
import textwrap
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, TypeVar
from urllib.parse import quote

import msgspec

from asya import typeinfo
from asya.envelope import Limits
from asya.errors import SettingsError

ENV_PREFIX = "ASYA_"


class TransportSettings(msgspec.Struct, frozen=True, kw_only=True):
    broker_url: Annotated[
        str | None,
        msgspec.Meta(
            description="AMQP URL of the broker (amqp://user:pass@host:5672/vhost); wins over"
            " the parts below"
        ),
    ] = None
    broker_host: Annotated[
        str | None,
        msgspec.Meta(
            description="broker host, when the URL is given in parts (credentials from a Secret)"
        ),
    ] = None
    broker_port: Annotated[int, msgspec.Meta(ge=1, le=65535, description="broker port")] = 5672
    broker_user: Annotated[str, msgspec.Meta(description="broker user")] = "guest"
    broker_password: Annotated[str, msgspec.Meta(description="broker password")] = "guest"
    broker_vhost: Annotated[str, msgspec.Meta(description="broker virtual host")] = "/"
    namespace: Annotated[
        str,
        msgspec.Meta(
            pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            description="namespace in queue names (asya.{namespace}.{actor}), so apps can share"
            " a broker",
        ),
    ] = "default"
    queue_type: Annotated[
        Literal["quorum", "classic"],
        msgspec.Meta(
            description="quorum (replicated, with a delivery limit for poison messages) or classic"
        ),
    ] = "quorum"
    delivery_limit: Annotated[
        int,
        msgspec.Meta(
            ge=1,
            description="redeliveries of one message before the broker sends it to error-end"
            " (quorum only)",
        ),
    ] = 20
    records_max_age: Annotated[
        str,
        msgspec.Meta(
            pattern=r"^[1-9][0-9]*[YMDhms]$",
            description="how long end records (results, failures, replays) are kept: a number"
            " and a unit, Y M D h m or s (RabbitMQ x-max-age); 7D = a week",
        ),
    ] = "7D"
    records_max_bytes: Annotated[
        int,
        msgspec.Meta(
            gt=0,
            description="how many bytes of each end-record stream are kept (RabbitMQ"
            " x-max-length-bytes); the oldest go first. 1 GiB",
        ),
    ] = 1024**3
    ack_window_ms: Annotated[
        float,
        msgspec.Meta(
            ge=0,
            le=1000,
            description="how long a consumer's ack may wait for others to go in the same frame"
            " (they go at once when a quarter of the prefetch waits, or the consumer has no"
            " delivery in hand and its prefetch is full). Fewer frames for the broker to"
            " settle; a crash in the window redelivers what was already done (at-least-once)."
            " 0 = at the end of the event loop's iteration",
        ),
    ] = 5.0

    @property
    def url(self) -> str | None:
        """The broker URL, from `broker_url` or from the parts; None = in-memory."""
        if self.broker_url:
            return self.broker_url
        if self.broker_host is None:
            return None
        vhost = "%2F" if self.broker_vhost == "/" else self.broker_vhost.lstrip("/")
        user, password = quote(self.broker_user, safe=""), quote(self.broker_password, safe="")
        return f"amqp://{user}:{password}@{self.broker_host}:{self.broker_port}/{vhost}"


TRANSPORT_DEFAULTS: Final = TransportSettings()
"""The transport settings no variable changed: the defaults of options built without them
(`asya.transport.rabbitmq.RabbitMQOptions`, `asya.transport.records.Retention`)."""


class SidecarSettings(msgspec.Struct, frozen=True, kw_only=True):
    actor: Annotated[
        str | None,
        msgspec.Meta(
            description="the actor whose queue the sidecar owns (happy-end and error-end included)"
        ),
    ] = None
    health_port: Annotated[
        int, msgspec.Meta(ge=0, le=65535, description="port for /healthz and /readyz; 0 = none")
    ] = 8080
    runtime_wait_s: Annotated[
        float,
        msgspec.Meta(
            gt=0,
            description="seconds the runtime may be unreachable before the sidecar stops"
            " consuming and reports not ready; calls are held meanwhile, never failed or"
            " requeued",
        ),
    ] = 30.0
    step_events: Annotated[
        bool,
        msgspec.Meta(
            description="print one JSON line per finished step on stdout (asya dev --isolate"
            " reads them)"
        ),
    ] = False


class RuntimeSettings(msgspec.Struct, frozen=True, kw_only=True):
    handler: Annotated[
        str | None, msgspec.Meta(description="handler reference module:attr the runtime serves")
    ] = None
    socket_path: Annotated[
        str,
        msgspec.Meta(
            description="Unix socket the runtime listens on and the sidecar connects to (an"
            " emptyDir in a pod)"
        ),
    ] = "/var/run/asya/asya-runtime.sock"
    grace_s: Annotated[
        float,
        msgspec.Meta(
            ge=0,
            description="seconds to finish in-flight work after SIGTERM before giving it back",
        ),
    ] = 30.0
    kill_grace_s: Annotated[
        float,
        msgspec.Meta(
            ge=0,
            description="seconds a worker gets past its timeout to give its call back before it"
            " is killed",
        ),
    ] = 2.0
    workers: Annotated[
        int,
        msgspec.Meta(
            ge=0,
            description="worker processes; 0 = the actor's concurrency for sync handlers, 1 for"
            " async ones",
        ),
    ] = 0
    actor_overrides: Annotated[
        str | None,
        msgspec.Meta(
            description="JSON object overriding the decorator's timeoutSeconds, concurrency,"
            " retry and batch, as an AsyncActor names them (the operator sets it)",
        ),
    ] = None


class ProcessSettings(msgspec.Struct, frozen=True, kw_only=True):
    log_level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        msgspec.Meta(
            description="level of the logs: DEBUG, INFO, WARNING, ERROR or CRITICAL (DEBUG also"
            " shows the broker client's tracebacks)"
        ),
    ] = "WARNING"
    log_format: Annotated[
        Literal["text", "json"],
        msgspec.Meta(
            description="text: one line per record, LEVEL logger: message key=value ...;"
            " json: one JSON object per line"
        ),
    ] = "text"
    pipeline_depth: Annotated[
        int,
        msgspec.Meta(
            ge=0,
            le=64,
            description="calls queued at each handler slot behind the one it runs, formed while"
            " it runs, so that a busy worker (a GPU) never waits for the round trip of"
            " publishing and acking; 0 = no overlap (a slot is held until its messages are"
            " settled). The prefetch is concurrency x (2 + depth) x batch",
        ),
    ] = 1
    event_loop: Annotated[
        Literal["auto", "asyncio", "uvloop"],
        msgspec.Meta(
            description="auto: uvloop when installed (much less CPU per envelope), else"
            " asyncio's own loop"
        ),
    ] = "auto"


OTEL_PREFIX = "OTEL_"

TRACES_EXPORTERS: Final = ("otlp", "console", "none")
"""What OTEL_TRACES_EXPORTER may name (a comma-separated list); otlp is OTLP over HTTP."""


class TracingSettings(msgspec.Struct, frozen=True, kw_only=True):
    """OpenTelemetry tracing, read from the standard `OTEL_*` variables (`otel_var`), not
    `ASYA_*`: the names every OpenTelemetry collector setup already uses. The SDK itself reads
    the rest (`OTEL_EXPORTER_OTLP_*`, `OTEL_TRACES_SAMPLER`, `OTEL_RESOURCE_ATTRIBUTES`...)."""

    traces_exporter: Annotated[
        str,
        msgspec.Meta(
            pattern=r"^ *(otlp|console|none) *(, *(otlp|console|none) *)*$",
            description="where spans go: otlp (OTLP over HTTP, to OTEL_EXPORTER_OTLP_ENDPOINT),"
            " console (one JSON line per span on stderr), none; a comma-separated list; none ="
            " tracing off (no OpenTelemetry import, no per-envelope cost)",
        ),
    ] = "none"
    service_name: Annotated[
        str | None,
        msgspec.Meta(
            description="service.name of the spans; unset = the process's own (asya-sidecar,"
            " asya-dev)"
        ),
    ] = None
    sdk_disabled: Annotated[
        bool, msgspec.Meta(description="true turns tracing off whatever the exporter says")
    ] = False

    @property
    def exporters(self) -> tuple[str, ...]:
        """The exporters to set up, none when tracing is off."""
        if self.sdk_disabled:
            return ()
        names = (name.strip() for name in self.traces_exporter.split(","))
        return tuple(dict.fromkeys(name for name in names if name != "none"))


class GangSettings(msgspec.Struct, frozen=True, kw_only=True):
    """A gang member's place in its ActorGroup instance, set by the operator on each member pod
    (`asya.gang.membership` reads it for handlers). All unset outside a group."""

    group: Annotated[
        str | None, msgspec.Meta(description="the ActorGroup this pod is a member of")
    ] = None
    group_instance: Annotated[
        Annotated[int, msgspec.Meta(ge=0)] | None,
        msgspec.Meta(description="the gang instance (from 0)"),
    ] = None
    group_member: Annotated[str | None, msgspec.Meta(description="the member this pod runs")] = None
    group_member_index: Annotated[
        Annotated[int, msgspec.Meta(ge=0)] | None,
        msgspec.Meta(description="this pod's index among the member's pods (from 0)"),
    ] = None
    group_rank_offset: Annotated[
        Annotated[int, msgspec.Meta(ge=0)] | None,
        msgspec.Meta(
            description="the rank of the member's first pod: the pods of the members before it"
        ),
    ] = None
    group_size: Annotated[
        Annotated[int, msgspec.Meta(ge=1)] | None,
        msgspec.Meta(description="pods in the instance, every member's"),
    ] = None
    group_leader: Annotated[
        str | None,
        msgspec.Meta(
            description="DNS name of the instance's rank-0 pod (the first member's first), to"
            " rendezvous at"
        ),
    ] = None


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    limits: Limits = Limits()
    transport: TransportSettings = TransportSettings()
    runtime: RuntimeSettings = RuntimeSettings()
    sidecar: SidecarSettings = SidecarSettings()
    process: ProcessSettings = ProcessSettings()
    tracing: TracingSettings = TracingSettings()
    gang: GangSettings = GangSettings()


def env_var(field_name: str) -> str:
    """The variable a settings field is read from: `hop_limit` -> `ASYA_HOP_LIMIT`."""
    return ENV_PREFIX + field_name.upper()


def otel_var(field_name: str) -> str:
    """The OpenTelemetry variable a tracing field is read from: `OTEL_TRACES_EXPORTER`."""
    return OTEL_PREFIX + field_name.upper()


G = TypeVar("G", bound=msgspec.Struct)


def load_group(
    group: type[G], environ: Mapping[str, str], variable_of: Callable[[str], str] = env_var
) -> G:
    """One settings group from `environ`: each field from its variable (`variable_of`), unset
    ones at their defaults.

    Raises:
        SettingsError: a variable's value does not parse as its field's type or range.
    """
    raw = {
        name: environ[variable_of(name)]
        for name in group.__struct_fields__
        if variable_of(name) in environ
    }
    for name, value in raw.items():
        # One field at a time, so a failure names its variable without parsing messages.
        try:
            typeinfo.convert({name: value}, group, strict=False)
        except msgspec.ValidationError as exc:
            variable = variable_of(name)
            detail = str(exc).partition(" - at ")[0] + _choices(group, name)
            raise SettingsError(
                f"{variable}={value!r} is invalid: {detail}", variable=variable, value=value
            ) from exc
    return typeinfo.convert(raw, group, strict=False)


def load_settings(environ: Mapping[str, str]) -> Settings:
    """Build Settings from `environ` (pass `os.environ` at the entry point).

    Raises:
        SettingsError: a variable's value does not parse as its field's type or range.
    """
    groups: dict[str, Any] = {name: load_group(group, environ) for name, group in _GROUPS.items()}
    return Settings(**groups, tracing=load_group(TracingSettings, environ, otel_var))


_GROUPS: dict[str, type[msgspec.Struct]] = {
    "limits": Limits,
    "transport": TransportSettings,
    "runtime": RuntimeSettings,
    "sidecar": SidecarSettings,
    "process": ProcessSettings,
    "gang": GangSettings,
}


@dataclass(frozen=True, kw_only=True)
class SettingInfo:
    """One variable as `--help` shows it."""

    variable: str
    default: Any
    description: str


def describe_settings(
    *groups: type[msgspec.Struct], omit: Collection[str] = ()
) -> list[SettingInfo]:
    """Variable, default and description of every field of `groups` but those in `omit`."""
    return [
        SettingInfo(variable=env_var(f.name), default=f.default, description=_description(f.type))
        for group in groups
        for f in msgspec.structs.fields(group)
        if f.name not in omit
    ]


def format_settings_help(settings: Sequence[SettingInfo]) -> str:
    """`ASYA_X=default` (or `ASYA_X (unset)`) and its description below it, one per variable."""
    lines = []
    for setting in settings:
        lines.append(f"  {setting.variable}{_shown(setting.default)}")
        lines.extend(
            textwrap.wrap(
                setting.description, width=96, initial_indent=" " * 6, subsequent_indent=" " * 6
            )
        )
    return "\n".join(lines)


def variables_parser(
    prog: str, summary: str, settings: Sequence[SettingInfo]
) -> argparse.ArgumentParser:
    """The argument parser of a process configured only by `ASYA_*` variables.

    It takes no arguments; `--help` prints `summary` and every variable with its default.
    """
    return argparse.ArgumentParser(
        prog=prog,
        description=summary,
        epilog="Takes no arguments; configured by these environment variables (defaults shown):"
        f"\n\n{format_settings_help(settings)}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _choices(group: type[msgspec.Struct], name: str) -> str:
    # msgspec says "Invalid enum value" for a Literal; the message should say what is valid.
    [annotation] = [f.type for f in msgspec.structs.fields(group) if f.name == name]
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) is not Literal:
        return ""
    return f" (expected one of: {', '.join(map(str, typing.get_args(annotation)))})"


def _description(annotation: Any) -> str:
    for meta in getattr(annotation, "__metadata__", ()):
        if isinstance(meta, msgspec.Meta) and meta.description:
            return meta.description
    return ""


def _shown(default: Any) -> str:
    # As the variable would be written: true/false, 30 rather than 30.0.
    if default is None:
        return " (unset)"
    if isinstance(default, bool):
        return f"={str(default).lower()}"
    if isinstance(default, float):
        return f"={default:g}"
    return f"={default}"


SIDECAR_VARIABLES: Final = describe_settings(
    Limits,
    TransportSettings,
    SidecarSettings,
    RuntimeSettings,
    ProcessSettings,
    omit=("handler", "kill_grace_s", "workers", "actor_overrides"),
)
"""The variables `asya-sidecar` reads, for its --help (the runtime's own ones left out)."""

RUNTIME_VARIABLES: Final = describe_settings(Limits, RuntimeSettings, ProcessSettings)
"""The variables `python -m asya.runtime` reads, for its --help."""
