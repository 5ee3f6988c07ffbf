"""What one handler call produced: the values that cross from user code to routing.

A call either succeeds with zero or more emitted payloads (each with the `next` and headers the
handler left in its context) or fails with an error that says whether it may be retried; a
call queued at a worker that drains before it starts is answered `NotStarted`. These
are msgspec Structs because they cross the runtime socket between the runtime and the sidecar.
Pure data; built by `asya.handler`, read by `asya.routing`.
"""

from __future__ import annotations

import msgspec

from asya.envelope import Payload, Reason
from asya.errors import EnvelopeError, PayloadTooLargeError


class Emitted(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """One payload for the next actor, with the route and headers it leaves with."""

    payload: Payload
    next: tuple[str, ...]
    headers: dict[str, str] = {}


class Success(msgspec.Struct, frozen=True, kw_only=True, tag="ok", tag_field="outcome"):
    """The handler returned. No outputs means the pipeline ends here, successfully."""

    outputs: tuple[Emitted, ...] = ()
    fan_out: bool = False
    """True when the handler was a generator: each output is a child with its own id."""
    unsendable: dict[int, str] = {}
    """Outputs a worker process could not send, by their index in `outputs`, with why (JSON
    would not carry them faithfully); their payloads are left out (None). Each goes to
    `error-end` as `InvalidOutput` and the others go on, as an in-process call's do. Only ever
    inside a `Failure.partial`."""


class Failure(msgspec.Struct, frozen=True, kw_only=True, tag="error", tag_field="outcome"):
    """The handler raised, timed out, returned something unusable, or its worker died."""

    reason: Reason
    type: str
    message: str
    retryable: bool
    traceback: str | None = None
    partial: Success | None = None
    """A worker's call that succeeded with outputs it could not all send: what a sidecar of
    this version routes instead of the failure (each unsendable output fails alone). An older
    sidecar does not know the field and fails the whole call, as it always did, rather than
    send an output it was not given."""


class NotStarted(msgspec.Struct, frozen=True, tag="unstarted", tag_field="outcome"):
    """The call was queued at a worker that was told to drain before it began: the handler
    never ran, and the envelope goes back to its queue untouched (no attempt counted)."""


Outcome = Success | Failure | NotStarted


def worker_crashed(message: str) -> Failure:
    """A call that ended with its worker, not with the handler: retryable."""
    return Failure(
        reason=Reason.WORKER_CRASHED, type="WorkerCrashed", message=message, retryable=True
    )


def unsendable_output(actor: str, error: EnvelopeError) -> Failure:
    """The failure of a call whose output cannot be sent (`encode_payload` refused it): too
    large, or not faithful JSON; permanent, as another attempt returns the same."""
    too_large = isinstance(error, PayloadTooLargeError)
    reason = Reason.PAYLOAD_TOO_LARGE if too_large else Reason.INVALID_OUTPUT
    return Failure(
        reason=reason,
        type=reason.value,
        message=f"output of '{actor}' cannot be sent: {error}",
        retryable=False,
    )
