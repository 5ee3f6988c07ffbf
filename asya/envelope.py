"""The envelope: what travels between actors, its JSON wire format, and its limits.

Owns the types of DESIGN.md §3 (Envelope, Route, Status, ErrorInfo), the closed sets that
describe an envelope's state (Phase, Reason), encoding and decoding with validation, the payload
size limit and envelope ids. Pure: no I/O, no clock, no randomness of its own — callers pass
`now` and a `random.Random`. Everything above it (routing, consumers, transports, clients)
builds and reads envelopes only through this module.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import random
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Final, TypeAlias

import msgspec

from asya.errors import EnvelopeError, PayloadTooLargeError
from asya.json_values import unfaithful_value

Payload: TypeAlias = Any
"""User data: whatever JSON value a handler takes and returns (`asya.json_values` says which
Python values those are)."""

ACTOR_NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""Actor names are DNS-1123 labels: they become queue, Deployment and label names."""

ACTOR_NAME_MAX_LENGTH: Final = 53
"""63 (a Kubernetes label) minus room for the `asya-` prefix and generated suffixes."""

ActorName = Annotated[
    str, msgspec.Meta(pattern=ACTOR_NAME_PATTERN, max_length=ACTOR_NAME_MAX_LENGTH)
]

REPLY_TO_HEADER: Final = "reply_to"
"""Header naming the reply queue the end actors send the final envelope to."""

ENVELOPE_OVERHEAD_BYTES: Final = 64 * 1024
"""Room for an envelope's own fields on top of the payload limit when checking a raw body."""

MAX_NESTING: Final = 256
"""Deepest a payload's arrays and objects may nest. A fixed bound, checked wherever an envelope
is decoded or a payload encoded, so an envelope one process accepts never fails in another
for being deeper than *its* Python stack allows (decoders recurse)."""

RAW_BODY_KEPT_BYTES: Final = 16 * 1024
"""How much of a body that is not an envelope a failure record keeps (with its size and hash),
so a record never outgrows what the broker accepted."""

_ACTOR_NAME = re.compile(ACTOR_NAME_PATTERN)


def actor_name_problem(name: str) -> str | None:
    """Why `name` is not a valid actor name, or None when it is."""
    if len(name) > ACTOR_NAME_MAX_LENGTH or not _ACTOR_NAME.match(name):
        return (
            f"'{name[:100]}' is not a valid actor name: use lowercase letters, digits and '-',"
            f" at most {ACTOR_NAME_MAX_LENGTH} characters"
        )
    return None


class Phase(enum.StrEnum):
    """Where an envelope is in its life."""

    PENDING = "pending"
    PROCESSING = "processing"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Reason(enum.StrEnum):
    """Why an envelope reached `error-end`. The one list; nothing matches on message text."""

    HANDLER_ERROR = "HandlerError"
    TIMEOUT = "Timeout"
    HOP_LIMIT_EXCEEDED = "HopLimitExceeded"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    UNKNOWN_ACTOR = "UnknownActor"
    MALFORMED_ENVELOPE = "MalformedEnvelope"
    PAYLOAD_TOO_LARGE = "PayloadTooLarge"
    INVALID_OUTPUT = "InvalidOutput"
    WORKER_CRASHED = "WorkerCrashed"
    DELIVERY_LIMIT_EXCEEDED = "DeliveryLimitExceeded"
    """The broker gave up on a message that kept crashing its consumer (a poison message)."""
    EXPIRED = "Expired"
    """The broker dropped the message from an actor's queue when its time to live ran out."""
    QUEUE_OVERFLOW = "QueueOverflow"
    """The broker pushed the message out of an actor's queue that was over its length limit."""
    REJECTED = "Rejected"
    """A consumer other than asya's rejected the message from an actor's queue."""
    NO_FAILURE_RECORDED = "NoFailureRecorded"
    """The envelope was published to `error-end` directly, without a failed status."""


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds every envelope is held to, wherever it is processed."""

    max_payload_bytes: Annotated[
        int,
        msgspec.Meta(
            gt=0,
            description="largest encoded payload, in bytes (4 MiB); large data travels as"
            " references (URLs)",
        ),
    ] = 4 * 1024 * 1024

    hop_limit: Annotated[
        int,
        msgspec.Meta(
            gt=0,
            description="most actors an envelope may pass through; stops agent loops that"
            " never end",
        ),
    ] = 64

    def __post_init__(self) -> None:
        if self.max_payload_bytes <= 0:
            raise EnvelopeError(f"max_payload_bytes must be > 0, got {self.max_payload_bytes}")
        if self.hop_limit <= 0:
            raise EnvelopeError(f"hop_limit must be > 0, got {self.hop_limit}")


END_LIMITS: Final = Limits(max_payload_bytes=2**62)
"""What end actors and reply readers decode with: whatever reached an end is kept, whatever its
size (the broker already accepted it)."""


class Route(msgspec.Struct, frozen=True, kw_only=True):
    """Where an envelope has been (`prev`), is (`curr`) and goes next (`next`)."""

    prev: tuple[str, ...] = ()
    curr: ActorName
    next: tuple[ActorName, ...] = ()

    def __post_init__(self) -> None:
        # Decoding checks the same pattern; this holds envelopes built in code to it too.
        for name in (self.curr, *self.next):
            problem = actor_name_problem(name)
            if problem is not None:
                raise EnvelopeError(f"route: {problem}")


class ErrorInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What went wrong in one attempt of one actor."""

    type: str
    message: str
    actor: str
    attempt: int
    traceback: str | None = None


class Status(msgspec.Struct, frozen=True, kw_only=True):
    """An envelope's state; every field has a default so any publisher may leave it out."""

    phase: Phase = Phase.PENDING
    actor: str | None = None
    attempt: Annotated[int, msgspec.Meta(ge=1)] = 1
    max_attempts: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    deadline_at: datetime | None = None
    reason: Reason | None = None
    error: ErrorInfo | None = None
    retries: tuple[ErrorInfo, ...] = ()
    """The errors of earlier attempts at the current actor, oldest first."""


class Branch(msgspec.Struct, frozen=True, kw_only=True):
    """One fan-out on an envelope's way: it is child `index` of `of` siblings."""

    index: Annotated[int, msgspec.Meta(ge=1)]
    of: Annotated[int, msgspec.Meta(ge=1)]

    def __post_init__(self) -> None:
        # Decoding checks the bounds too; this holds branches built in code to them.
        if not 1 <= self.index <= self.of:
            raise EnvelopeError(
                f"lineage: child {self.index} of {self.of} is not a child; expected"
                " 1 <= index <= of"
            )


class Envelope(msgspec.Struct, frozen=True, kw_only=True):
    """One unit of work and its history. Fan-out children have ids `<parent id>-<i>`."""

    id: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    parent_id: str | None = None
    route: Route
    lineage: tuple[Branch, ...] = ()
    """Where this envelope stands in its call's fan-out tree: one `Branch` per fan-out between
    the envelope a client sent and this one, outermost first (empty for the one sent). A client
    tells from the final envelopes' lineages alone when every branch has ended
    (`asya.lineage`)."""
    headers: dict[str, str] = {}
    status: Status = Status()
    payload: Payload = None


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Envelope)
_any_decoder = msgspec.json.Decoder()
_portable_encoder = msgspec.msgpack.Encoder()

_DIGITS_AS_NUL: Final = bytes.maketrans(b"0123456789", b"\0" * 10)
"""Every digit becomes NUL, a byte JSON text never holds raw: digit runs become NUL runs."""
_WIDE_POSITIVE: Final = b"\0" * 20
_WIDE_NEGATIVE: Final = b"-" + b"\0" * 19

_NESTING_TYPES: Final = frozenset({dict, list, tuple})
"""What payloads nest in: decoded JSON's dicts and lists, and a handler's tuples."""

_CROCKFORD: Final = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_envelope_id(now: datetime, rng: random.Random) -> str:
    """A ULID: 48 bits of milliseconds then 80 random bits, 26 chars, sortable by time."""
    value = (int(now.timestamp() * 1000) << 80) | rng.getrandbits(80)
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def encode_payload(
    payload: Payload, limits: Limits, *, root: str = "payload", checked: bool = False
) -> bytes:
    """Encode a payload as JSON and hold it to the size limit.

    Only what arrives as it was sent is encoded (`asya.json_values`): NaN, sets, bytes, dates,
    numpy values and the like fail, the message naming their place under `root`
    (`payload.scores[3]`) and the fix. Tuples become lists. `checked`: the payload is known to
    hold JSON's own values only (decoded from JSON, or checked where it was made, as a runtime
    worker does): it is encoded and held to the size limit, not checked again.

    Raises:
        EnvelopeError: the payload holds something JSON cannot carry faithfully.
        PayloadTooLargeError: the encoded payload is over `limits.max_payload_bytes`.
    """
    data = _encode(payload, root)
    if len(data) > limits.max_payload_bytes:
        raise PayloadTooLargeError(
            f"payload is {len(data)} bytes, over the limit of {limits.max_payload_bytes} bytes;"
            " pass large data by reference (an object-store URL) instead of inline",
            limit_bytes=limits.max_payload_bytes,
            observed_bytes=len(data),
        )
    if not checked:
        _check_faithful(payload, data, root)
    return data


def check_payload(payload: Payload, *, root: str = "payload") -> None:
    """Hold a payload to what `encode_payload` accepts, its size aside.

    Raises:
        EnvelopeError: the payload holds something JSON cannot carry faithfully.
    """
    _check_faithful(payload, _encode(payload, root), root)


def _encode(payload: Payload, root: str) -> bytes:
    try:
        data = _encoder.encode(payload)
    except RecursionError as exc:
        raise EnvelopeError(_too_deep()) from exc
    except (TypeError, ValueError, OverflowError) as exc:
        problem = unfaithful_value(payload, root)
        if problem is None:
            problem = f"{root} cannot be encoded as JSON: {exc}"
        raise EnvelopeError(problem) from exc
    if _may_nest_deeper(data) and _nested_deeper_than(payload, MAX_NESTING):
        raise EnvelopeError(_too_deep())
    return data


def _check_faithful(payload: Payload, data: bytes, root: str) -> None:
    if not _is_plain(payload, data):
        problem = unfaithful_value(payload, root)
        if problem is not None:
            raise EnvelopeError(problem)


def _is_plain(payload: Payload, data: bytes) -> bool:
    """Whether `payload` surely holds JSON's own values only; False sends it to the walk
    (`asya.json_values`), which tells what is converted on purpose from what fails.

    Each test runs at C speed. msgpack refuses integers past 64 bits. `to_builtins` turns sets,
    bytes, dates, UUIDs, decimals, plain enums and non-string keys into something else, so the
    payload no longer equals it; but it keeps each float as it was, and a container compares
    its items by identity first, so NaN would pass: NaN and ±Infinity encode as `null`, and
    with a `null` in the text the payload must instead decode back equal (slower: a vector's
    floats are parsed again).
    """
    try:
        _portable_encoder.encode(payload)
        if b"null" in data:
            return bool(_any_decoder.decode(data) == payload)
        return bool(msgspec.to_builtins(payload, str_keys=True) == payload)
    except Exception:  # past 64 bits, or a user type's __eq__ that raises: the walk says
        return False


def encode_envelope(envelope: Envelope, limits: Limits, *, checked: bool = False) -> bytes:
    """Encode an envelope as JSON, its payload held to the size limit (`checked`: as for
    `encode_payload`).

    Raises:
        EnvelopeError: the payload holds something JSON cannot carry faithfully.
        PayloadTooLargeError: the encoded payload is over the limit.
    """
    raw = msgspec.Raw(encode_payload(envelope.payload, limits, checked=checked))
    return _encoder.encode(msgspec.structs.replace(envelope, payload=raw))


def decode_envelope(body: bytes, limits: Limits) -> Envelope:
    """Decode and validate an envelope from JSON bytes.

    Raises:
        PayloadTooLargeError: the body is over the payload limit plus the envelope's overhead.
        EnvelopeError: the body is not JSON, or not an envelope; the message names the field.
    """
    limit = limits.max_payload_bytes + ENVELOPE_OVERHEAD_BYTES
    if len(body) > limit:
        raise PayloadTooLargeError(
            f"envelope is {len(body)} bytes, over the limit of {limit} bytes"
            f" ({limits.max_payload_bytes} for the payload plus {ENVELOPE_OVERHEAD_BYTES}"
            " for the envelope)",
            limit_bytes=limit,
            observed_bytes=len(body),
        )
    try:
        envelope = _decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise EnvelopeError(f"not a valid envelope: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise EnvelopeError(f"not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise EnvelopeError(f"not a valid envelope: {_too_deep()}") from exc
    except (UnicodeError, ValueError, TypeError, OverflowError) as exc:
        raise EnvelopeError(f"not valid JSON: {exc}") from exc
    if _may_nest_deeper(body) and _nested_deeper_than(envelope.payload, MAX_NESTING):
        raise EnvelopeError(f"not a valid envelope: {_too_deep()}")
    if _may_hold_wide_int(body):
        _check_portable(envelope)
    return _with_aware_times(envelope)


def _may_hold_wide_int(body: bytes) -> bool:
    # The shortest integers outside 64 bits: 2**64 (20 digits) and -2**63 - 1 (a minus and
    # 19 digits). A 19-digit positive number, such as a nanosecond timestamp, does not count.
    # translate and `in` run at C speed, several times faster than a regular expression.
    digits = body.translate(_DIGITS_AS_NUL)
    return _WIDE_POSITIVE in digits or _WIDE_NEGATIVE in digits


def _too_deep() -> str:
    return f"the payload nests arrays or objects more than {MAX_NESTING} levels deep"


def _may_nest_deeper(data: bytes) -> bool:
    # Fewer openers than the bound cannot nest past it: most payloads skip the walk.
    return data.count(b"[") + data.count(b"{") > MAX_NESTING


def _nested_deeper_than(value: Payload, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` deep in `value` (no recursion).

    Level by level; a level of scalars only (a vector of floats) is skipped at C speed.
    """
    level = [value] if type(value) in _NESTING_TYPES else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Payload] = []
        for item in level:
            children = item.values() if type(item) is dict else item
            if not _NESTING_TYPES.isdisjoint(map(type, children)):
                below += [c for c in children if type(c) in _NESTING_TYPES]
        level = below
    return False


def _check_portable(envelope: Envelope) -> None:
    # JSON allows any integer; the runtime's msgpack frames carry 64 bits. Refuse here, so an
    # envelope decodes only if every hop (and every transport) can carry it.
    try:
        _portable_encoder.encode(envelope)
    except OverflowError as exc:
        raise EnvelopeError(
            "not a valid envelope: it holds an integer outside the 64-bit range"
            " (-2**63 .. 2**64-1); send such numbers as strings"
        ) from exc
    except (RecursionError, ValueError, TypeError) as exc:
        raise EnvelopeError(f"not a valid envelope: {exc}") from exc


def _with_aware_times(envelope: Envelope) -> Envelope:
    # A time without a timezone is read as UTC: comparing it with an aware `now` would raise.
    status = envelope.status
    if all(
        t is None or t.tzinfo is not None
        for t in (status.created_at, status.updated_at, status.deadline_at)
    ):
        return envelope
    fixed = msgspec.structs.replace(
        status,
        created_at=_aware(status.created_at),
        updated_at=_aware(status.updated_at),
        deadline_at=_aware(status.deadline_at),
    )
    return msgspec.structs.replace(envelope, status=fixed)


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def raw_body_record(body: bytes) -> dict[str, Payload]:
    """What a failure record keeps of bytes that are not an envelope.

    The first `RAW_BODY_KEPT_BYTES` as base64, the full size and sha256, and whether it was
    cut: enough to recognise and debug the message, never larger than a few tens of KiB.
    """
    kept = body[:RAW_BODY_KEPT_BYTES]
    return {
        "body_base64": base64.b64encode(kept).decode("ascii"),
        "body_bytes": len(body),
        "body_sha256": hashlib.sha256(body).hexdigest(),
        "body_truncated": len(kept) < len(body),
    }
