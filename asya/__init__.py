"""asya: multi-step AI/ML pipelines built from actors.

Decorate functions or classes with `@actor`, run them locally with `asya dev`, deploy them
with Helm. Everything else is imported by module path (`asya.routing`, `asya.transport.memory`).
"""

from asya.actor import actor
from asya.client import Client
from asya.context import Context
from asya.envelope import Envelope, ErrorInfo, Limits, Phase, Reason, Route, Status
from asya.errors import (
    ActorDefinitionError,
    AdmissionError,
    AsyaError,
    EnvelopeError,
    PayloadTooLargeError,
    PermanentError,
    RuntimeProtocolError,
    RuntimeUnavailableError,
    SettingsError,
    TransportError,
    UnknownActorError,
)
from asya.retry import RetryPolicy

__all__ = [
    "ActorDefinitionError",
    "AdmissionError",
    "AsyaError",
    "Client",
    "Context",
    "Envelope",
    "EnvelopeError",
    "ErrorInfo",
    "Limits",
    "PayloadTooLargeError",
    "PermanentError",
    "Phase",
    "Reason",
    "RetryPolicy",
    "Route",
    "RuntimeProtocolError",
    "RuntimeUnavailableError",
    "SettingsError",
    "Status",
    "TransportError",
    "UnknownActorError",
    "actor",
]
