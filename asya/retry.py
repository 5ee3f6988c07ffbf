"""Retry policy: which failures are tried again, how often, and after how long.

Pure: the backoff takes the attempt number and a `random.Random` for jitter, so schedules are
tested exactly. Called by `asya.handler` (is this exception retryable?) and by the consumer
(how long until the next attempt, if any). The delay itself is carried out by the transport.
`@actor` asks `retry_option_hint` for the fix when it is given a keyword that belongs here
(`max_retries=3` is `retry=RetryPolicy(max_attempts=4)`).

The schedule is capped exponential backoff with "subtractive" jitter: the nominal delay
`base * factor**(attempt-1)`, capped at `max_delay_ms`, is shortened by up to `jitter` of itself.
Jitter only ever shortens, so the cap is a true upper bound that operators can rely on.
"""

from __future__ import annotations

import dataclasses
import difflib
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Self, TypeAlias

import msgspec

from asya.errors import ActorDefinitionError, PermanentError
from asya.outcome import Failure

if TYPE_CHECKING:
    ExceptionTypes: TypeAlias = type[BaseException] | tuple[type[BaseException], ...]
    """What `except` takes: one exception class or a tuple of them."""
else:
    # What the field holds once built (`__post_init__` makes a class a one-tuple), and what
    # msgspec reads when `ActorOptions` holds a policy: it takes no union of these two.
    ExceptionTypes = tuple[type[BaseException], ...]


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How an actor's failed calls are retried."""

    max_attempts: int = 3
    """Calls at most per envelope at this actor, the first included (1 = never retry)."""
    base_delay_ms: int = 1000
    """Delay before the second attempt, in milliseconds."""
    factor: float = 2.0
    """Each further delay is this many times the one before."""
    max_delay_ms: int = 60_000
    """No delay is longer than this, jitter included."""
    jitter: float = 0.1
    """Up to this fraction of each delay is taken off at random, so retries do not stampede."""
    retry_on: ExceptionTypes = (Exception,)
    """Exception types that are retried (subclasses too): a class or a tuple of classes, as
    `except` takes; kept as a tuple."""
    never_retry: ExceptionTypes = field(default=())
    """Exception types that fail at once; they win over `retry_on`. A class or a tuple."""
    retry_timeouts: bool = True
    """Whether a call that ran past the actor's timeout is tried again."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # Checked before the generated __init__, which would raise a bare TypeError instead.
        fields = sorted(cls.__dataclass_fields__)
        if args:
            raise ActorDefinitionError(
                f"RetryPolicy takes keyword arguments only ({', '.join(fields)}), got {args!r}"
            )
        for key in kwargs:
            if key not in fields:
                close = difflib.get_close_matches(key, fields, n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise ActorDefinitionError(
                    f"RetryPolicy: unknown field '{key}'{hint} (valid fields: {', '.join(fields)})"
                )
        return super().__new__(cls)

    @property
    def schedule(self) -> RetrySchedule:
        """The attempts and delays, without the exception types (which stay with the handler:
        it marks each failure retryable or not)."""
        return RetrySchedule(
            max_attempts=self.max_attempts,
            base_delay_ms=self.base_delay_ms,
            factor=self.factor,
            max_delay_ms=self.max_delay_ms,
            jitter=self.jitter,
            retry_timeouts=self.retry_timeouts,
        )

    def __post_init__(self) -> None:
        problems = []
        if self.max_attempts < 1:
            problems.append(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.base_delay_ms < 0 or self.max_delay_ms < 0:
            problems.append("base_delay_ms and max_delay_ms must be >= 0")
        if self.factor < 1.0:
            problems.append(f"factor must be >= 1.0, got {self.factor}")
        if not 0.0 <= self.jitter <= 1.0:
            problems.append(f"jitter must be between 0.0 and 1.0, got {self.jitter}")
        for name in ("retry_on", "never_retry"):
            given = getattr(self, name)
            if _is_exception_class(given):
                object.__setattr__(self, name, (given,))
            else:
                problems.extend(_exception_types_problems(name, given))
        if problems:
            raise ActorDefinitionError("invalid RetryPolicy: " + "; ".join(problems))


def _is_exception_class(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, BaseException)


def _exception_types_problems(name: str, given: object) -> list[str]:
    """What is wrong with `given` as a class-or-tuple field, each with the fix."""
    expected = f"{name} takes an exception class or a tuple of them, as `except` does"
    if isinstance(given, tuple):
        return [
            f"{name} must hold exception classes, got {kind!r}"
            + (
                f" (an instance: write {type(kind).__name__})"
                if isinstance(kind, BaseException)
                else ""
            )
            for kind in given
            if not _is_exception_class(kind)
        ]
    if isinstance(given, BaseException):
        return [f"{expected}; got the instance {given!r}: write {name}={type(given).__name__}"]
    if isinstance(given, list | set | frozenset):
        names = [getattr(k, "__name__", repr(k)) for k in given]
        listed = ", ".join(names) + ("," if len(names) == 1 else "")
        return [f"{expected}; got a {type(given).__name__}: write {name}=({listed})"]
    if isinstance(given, type):
        return [f"{expected}; {given.__name__} is not an exception class"]
    if isinstance(given, str):
        return [f"{expected}; got the string {given!r}: write the class, {name}={given}"]
    if given is None:
        return [f"{expected}; got None: write {name}=() for none"]
    return [f"{expected}; got {given!r}"]


class RetrySchedule(msgspec.Struct, frozen=True, kw_only=True):
    """A `RetryPolicy`'s attempts and delays (its `schedule`): what the message chain needs to
    decide when an envelope is tried again, and what crosses the runtime socket."""

    max_attempts: int
    base_delay_ms: int
    factor: float
    max_delay_ms: int
    jitter: float
    retry_timeouts: bool


Schedule: TypeAlias = RetryPolicy | RetrySchedule
"""Either carries the fields the backoff reads."""


def is_retryable(policy: RetryPolicy, error: BaseException) -> bool:
    """Whether a handler's exception may be retried under `policy` (attempts aside)."""
    if isinstance(error, (PermanentError, policy.never_retry)):
        return False
    return isinstance(error, policy.retry_on)


def backoff_ms(policy: Schedule, attempt: int, rng: random.Random) -> int:
    """Delay after failed attempt number `attempt` (1-based) before the next one."""
    nominal = min(policy.max_delay_ms, policy.base_delay_ms * policy.factor ** (attempt - 1))
    return round(nominal * (1.0 - policy.jitter * rng.random()))


def next_delay_ms(
    policy: Schedule, failure: Failure, attempt: int, rng: random.Random
) -> int | None:
    """The delay before trying again, or None when the envelope must go to `error-end`."""
    if not failure.retryable or attempt >= policy.max_attempts:
        return None
    return backoff_ms(policy, attempt, rng)


_RETRY_FIELDS: Final = frozenset(f.name for f in dataclasses.fields(RetryPolicy))
_RETRY_WORDS: Final = ("retr", "attempt", "tries", "backoff", "delay", "jitter")
"""Parts of an option name that say it is about retrying (`max_retries`, `retry_count`,
`attempts`, `max_tries`, `backoff_ms`, `retry_delay`); they are never near-misses of a scaling
option, whatever the spelling distance says (`max_retries` is not `max_replicas`)."""
_DELAY_WORDS: Final = ("backoff", "delay", "wait")


def retry_option_hint(key: str, value: object) -> str | None:
    """The fix for an unknown `@actor` keyword that belongs to the retry policy
    (`max_retries=3` -> `retry=RetryPolicy(max_attempts=4)`), or None if `key` is not one."""
    lowered = key.lower()
    if key in _RETRY_FIELDS:
        return f"it is a RetryPolicy field: write retry=RetryPolicy({key}={_as_source(value)})"
    if not any(word in lowered for word in _RETRY_WORDS):
        return None
    count = value if isinstance(value, int) and not isinstance(value, bool) else None
    if any(word in lowered for word in _DELAY_WORDS):
        delay_ms = "MS"
        if isinstance(value, int | float) and not isinstance(value, bool):
            if lowered.endswith("_ms"):
                delay_ms = str(round(value))
            elif lowered.endswith("_s"):
                delay_ms = str(round(value * 1000))
        return (
            "retry delays are set by the retry policy: write"
            f" retry=RetryPolicy(base_delay_ms={delay_ms}), the wait before the first retry in"
            " milliseconds, doubled for each next one (factor=2.0) up to max_delay_ms"
        )
    if "attempt" in lowered or "tries" in lowered.replace("retries", ""):
        attempts = "N" if count is None else str(count)
        return (
            "retries are set by the retry policy: write"
            f" retry=RetryPolicy(max_attempts={attempts}), the calls in all, the first included"
        )
    if count is not None and count >= 0:
        return (
            f"retries are set by the retry policy, whose max_attempts counts the first call too:"
            f" for {count} retries write retry=RetryPolicy(max_attempts={count + 1})"
        )
    return (
        "retries are set by the retry policy: write retry=RetryPolicy(max_attempts=N), the calls"
        " in all, the first included (asya.retry.RetryPolicy; max_attempts=1 never retries)"
    )


def _as_source(value: object) -> str:
    """`value` as it would be written in code: classes by name (`ValueError`, not its repr)."""
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, tuple):
        items = [_as_source(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    return repr(value)
