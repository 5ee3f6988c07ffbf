"""Retry policy: which failures are tried again, how often, and after how long.

Pure: the backoff takes the attempt number and a `random.Random` for jitter, so schedules are
tested exactly. Called by `asya.handler` (is this exception retryable?) and by the consumer
(how long until the next attempt, if any). The delay itself is carried out by the transport.

The schedule is capped exponential backoff with "subtractive" jitter: the nominal delay
`base * factor**(attempt-1)`, capped at `max_delay_ms`, is shortened by up to `jitter` of itself.
Jitter only ever shortens, so the cap is a true upper bound that operators can rely on.
"""

from __future__ import annotations

import difflib
import random
from dataclasses import dataclass, field
from typing import Any, Self, TypeAlias

import msgspec

from asya.errors import ActorDefinitionError, PermanentError
from asya.outcome import Failure


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
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    """Exception types that are retried (subclasses too)."""
    never_retry: tuple[type[BaseException], ...] = field(default=())
    """Exception types that fail at once; they win over `retry_on`."""
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
            for kind in getattr(self, name):
                if not (isinstance(kind, type) and issubclass(kind, BaseException)):
                    problems.append(f"{name} must hold exception classes, got {kind!r}")
        if problems:
            raise ActorDefinitionError("invalid RetryPolicy: " + "; ".join(problems))


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
    if isinstance(error, (PermanentError, *policy.never_retry)):
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
