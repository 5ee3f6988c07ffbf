"""asya: multi-step AI/ML pipelines built from actors.

Decorate functions or classes with `@actor`, run them locally with `asya dev`, on a broker
with `asya serve` or as runtime + sidecar pods; call them with `Client`. Everything else is
imported by module path (`asya.routing`, `asya.testing`, `asya.transport.memory`).
"""

from asya.actor import actor
from asya.client import CallTimeoutError, Client, ManyFinalsError, Results
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
    "CallTimeoutError",
    "Client",
    "Context",
    "Envelope",
    "EnvelopeError",
    "ErrorInfo",
    "Limits",
    "ManyFinalsError",
    "PayloadTooLargeError",
    "PermanentError",
    "Phase",
    "Reason",
    "Results",
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
