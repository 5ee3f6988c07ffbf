"""The errors asya raises, one tree split by who must act.

    AsyaError
    ├── ActorDefinitionError   user code or its options are wrong (raised at decoration or load)
    ├── SettingsError          an ASYA_* variable or a command-line value is wrong
    ├── EnvelopeError          bytes or fields that are not a valid envelope
    │   └── PayloadTooLargeError   an encoded payload is over the configured limit
    ├── TransportError         the broker (or the in-memory stand-in) failed us
    │   └── UnknownActorError      a publish named an actor that has no queue
    ├── RuntimeProtocolError   the runtime socket spoke something that is not our protocol
    ├── RuntimeUnavailableError    the runtime cannot be reached or went away mid-call
    ├── AdmissionError         cluster policy refused something
    ├── PermanentError         raised by handlers: fail now, never retry
    ├── ManyFinalsError        `Client.call` got a fan-out (asya.client: it carries the Results)
    └── CallTimeoutError       a call's tree did not end in time (asya.client; a TimeoutError)

Why an envelope ended in `error-end` is not an exception but a `Reason` (see `asya.envelope`);
nothing in asya matches on message text.
"""

from __future__ import annotations


class AsyaError(Exception):
    """Root of every error asya raises on purpose."""


class ActorDefinitionError(AsyaError):
    """An `@actor` declaration, its options, or a handler reference cannot be used as written."""

    def __init__(self, message: str, *, actor: str | None = None) -> None:
        super().__init__(message)
        self.actor = actor


class SettingsError(AsyaError):
    """A setting (environment variable or CLI value) has a value of the wrong type or range."""

    def __init__(self, message: str, *, variable: str, value: str | None) -> None:
        super().__init__(message)
        self.variable = variable
        self.value = value


class EnvelopeError(AsyaError, ValueError):
    """Bytes that do not decode to a valid envelope, or an envelope that cannot be encoded.

    Also a `ValueError`, so that msgspec reports it as a validation error while decoding.
    """


class PayloadTooLargeError(EnvelopeError):
    """An encoded payload is larger than the configured limit."""

    def __init__(self, message: str, *, limit_bytes: int, observed_bytes: int) -> None:
        super().__init__(message)
        self.limit_bytes = limit_bytes
        self.observed_bytes = observed_bytes


class TransportError(AsyaError):
    """The transport could not do what was asked (connection, declaration, publish)."""


class UnknownActorError(TransportError):
    """A publish named an actor that has no queue: the envelope would have been dropped."""

    def __init__(self, message: str, *, actor: str) -> None:
        super().__init__(message)
        self.actor = actor


class RuntimeProtocolError(AsyaError):
    """A frame on the runtime socket is malformed, too large, or answers no request."""


class RuntimeUnavailableError(AsyaError):
    """The runtime cannot be reached, or the connection broke with calls in flight.

    Not the envelope's fault: the sidecar holds the envelope and calls again once the runtime
    is back; it is never failed, and never requeued (which would count as a delivery).
    """


class AdmissionError(AsyaError):
    """A scheduling scenario or pool definition cannot be used as written."""


class PermanentError(AsyaError):
    """Raise from a handler to send the envelope to `error-end` at once, without retries."""
