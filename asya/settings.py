"""One typed settings object per process, built once from `ASYA_*` variables at the entry point.

Small frozen groups, every field with its default and a line on unit and reason. Each field is
read from `ASYA_<FIELD NAME IN CAPITALS>` (`env_var` builds the name; a test keeps them unique).
`load_settings` parses with msgspec and fails at start naming the variable, the value and the
expected type: never a silent fallback. Nothing else in asya reads `os.environ`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import quote

import msgspec

from asya.envelope import Limits
from asya.errors import SettingsError

ENV_PREFIX = "ASYA_"


class TransportSettings(msgspec.Struct, frozen=True, kw_only=True):
    broker_url: str | None = None
    """AMQP URL of the broker (`amqp://user:pass@host:5672/vhost`); wins over the parts below."""
    broker_host: str | None = None
    """Broker host, when the URL is given in parts (credentials from a Secret, say)."""
    broker_port: Annotated[int, msgspec.Meta(ge=1, le=65535)] = 5672
    """Broker port."""
    broker_user: str = "guest"
    """Broker user."""
    broker_password: str = "guest"
    """Broker password."""
    broker_vhost: str = "/"
    """Broker virtual host."""
    namespace: Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")] = "default"
    """Namespace in queue names (`asya-{namespace}-{actor}`), so apps can share a broker."""
    queue_type: Literal["quorum", "classic"] = "quorum"
    """quorum (replicated, with a delivery limit for poison messages) or classic."""
    delivery_limit: Annotated[int, msgspec.Meta(ge=1)] = 20
    """Redeliveries of one message before the broker sends it to error-end (quorum only)."""

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


class SidecarSettings(msgspec.Struct, frozen=True, kw_only=True):
    actor: str | None = None
    """The actor whose queue the sidecar owns (`happy-end` and `error-end` included)."""
    health_port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 8080
    """Port for /healthz and /readyz; 0 = no health server."""
    runtime_wait_s: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    """How long a call waits for an unreachable runtime before its envelope is requeued."""
    step_events: bool = False
    """Print one JSON line per finished step on stdout (`asya dev --isolate` reads them)."""


class RuntimeSettings(msgspec.Struct, frozen=True, kw_only=True):
    handler: str | None = None
    """Handler reference `module:attr` the runtime serves."""
    socket_path: str = "/var/run/asya/asya-runtime.sock"
    """Unix socket the runtime listens on and the sidecar connects to (an emptyDir in a pod)."""
    grace_s: Annotated[float, msgspec.Meta(ge=0)] = 30.0
    """Seconds to finish in-flight work after SIGTERM before giving it back."""
    kill_grace_s: Annotated[float, msgspec.Meta(ge=0)] = 2.0
    """Seconds a worker gets past its timeout to give its call back before it is killed."""
    workers: Annotated[int, msgspec.Meta(ge=0)] = 0
    """Worker processes; 0 = the actor's concurrency for sync handlers, 1 for async ones."""


class ProcessSettings(msgspec.Struct, frozen=True, kw_only=True):
    log_level: str = "WARNING"
    """Level for asya's logs: DEBUG, INFO, WARNING, ERROR."""
    event_loop: Literal["auto", "asyncio", "uvloop"] = "auto"
    """auto: uvloop when installed (much less CPU per envelope), else asyncio's own loop."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    limits: Limits = Limits()
    transport: TransportSettings = TransportSettings()
    runtime: RuntimeSettings = RuntimeSettings()
    sidecar: SidecarSettings = SidecarSettings()
    process: ProcessSettings = ProcessSettings()


def env_var(field_name: str) -> str:
    """The variable a settings field is read from: `hop_limit` -> `ASYA_HOP_LIMIT`."""
    return ENV_PREFIX + field_name.upper()


def load_settings(environ: Mapping[str, str]) -> Settings:
    """Build Settings from `environ` (pass `os.environ` at the entry point).

    Raises:
        SettingsError: a variable's value does not parse as its field's type or range.
    """
    groups: dict[str, Any] = {}
    for group_name, group_type in _GROUPS.items():
        raw = {
            name: environ[env_var(name)]
            for name in group_type.__struct_fields__
            if env_var(name) in environ
        }
        for name, value in raw.items():
            # One field at a time, so a failure names its variable without parsing messages.
            try:
                msgspec.convert({name: value}, group_type, strict=False)
            except msgspec.ValidationError as exc:
                variable = env_var(name)
                detail = str(exc).partition(" - at ")[0]
                raise SettingsError(
                    f"{variable}={value!r} is invalid: {detail}", variable=variable, value=value
                ) from exc
        groups[group_name] = msgspec.convert(raw, group_type, strict=False)
    return Settings(**groups)


_GROUPS: dict[str, type[msgspec.Struct]] = {
    "limits": Limits,
    "transport": TransportSettings,
    "runtime": RuntimeSettings,
    "sidecar": SidecarSettings,
    "process": ProcessSettings,
}
