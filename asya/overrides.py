"""Execution options a deployment sets over an actor's decorator: `ASYA_ACTOR_OVERRIDES`.

On Kubernetes the AsyncActor may override what `@actor(...)` says about running calls
(`timeoutSeconds`, `concurrency`, `retry`, `batch`); the operator passes those fields to the
runtime container as one JSON object, named and shaped as in the CR. Each runtime worker
applies them to the spec it loaded, before it tells its sidecar about the actor, so the
worker's timeout, the sidecar's retries and batching, and the pool size all see one spec.

A batch override changes the size and wait of an actor declared with `batch`; it cannot make
a handler that takes one payload take lists. A retry override replaces the decorator's policy
whole, as `@actor(retry=RetryPolicy(...))` would (a field left out takes RetryPolicy's
default), except for the exception types retried, which only code can name: those stay the
decorator's.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

import msgspec

from asya import typeinfo
from asya.actor import ActorSpec
from asya.errors import ActorDefinitionError
from asya.retry import RetryPolicy

_RETRY: Final = RetryPolicy()


class _Wire(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    pass


class RetryOverride(_Wire, frozen=True, kw_only=True):
    max_attempts: Annotated[int, msgspec.Meta(ge=1)] = _RETRY.max_attempts
    base_delay_ms: Annotated[int, msgspec.Meta(ge=0)] = _RETRY.base_delay_ms
    factor: float = _RETRY.factor
    max_delay_ms: Annotated[int, msgspec.Meta(ge=0)] = _RETRY.max_delay_ms
    jitter: float = _RETRY.jitter
    retry_timeouts: bool = _RETRY.retry_timeouts


class BatchOverride(_Wire, frozen=True, kw_only=True):
    size: Annotated[int, msgspec.Meta(ge=1)]
    wait_ms: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """None: the decorator's `batch_wait_ms`."""


class ActorOverrides(_Wire, frozen=True, kw_only=True):
    """The AsyncActor's execution fields; None = the decorator's value."""

    timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] | None = None
    concurrency: Annotated[int, msgspec.Meta(ge=1)] | None = None
    retry: RetryOverride | None = None
    batch: BatchOverride | None = None


def parse_overrides(text: str) -> ActorOverrides:
    """Raises: ActorDefinitionError naming what is wrong (not JSON, a bad or unknown field)."""
    try:
        return typeinfo.decode_json(text, ActorOverrides)
    except msgspec.DecodeError as exc:
        raise ActorDefinitionError(f"ASYA_ACTOR_OVERRIDES is invalid: {exc}") from exc


def apply_overrides(spec: ActorSpec, overrides: ActorOverrides) -> ActorSpec:
    """`spec` with the overridden fields replaced.

    Raises:
        ActorDefinitionError: the retry override is not a valid RetryPolicy, or a batch
            override names an actor whose handler takes one payload.
    """
    if overrides.batch is not None and spec.batch is None:
        # Its handler takes one payload, not a list: every call would fail.
        raise ActorDefinitionError(
            f"ASYA_ACTOR_OVERRIDES sets a batch for '{spec.name}', whose handler takes one"
            " payload at a time: declare @actor(batch=N) on a handler that takes a list, or"
            " remove `batch` from the AsyncActor",
            actor=spec.name,
        )
    changes: dict[str, Any] = {}
    if overrides.timeout_seconds is not None:
        changes["timeout_s"] = overrides.timeout_seconds
    if overrides.concurrency is not None:
        changes["concurrency"] = overrides.concurrency
    if overrides.retry is not None:
        changes["retry"] = RetryPolicy(
            **{
                f.name: getattr(overrides.retry, f.name)
                for f in msgspec.structs.fields(RetryOverride)
            },
            retry_on=spec.retry.retry_on,
            never_retry=spec.retry.never_retry,
        )
    if overrides.batch is not None:
        changes["batch"] = overrides.batch.size
        if overrides.batch.wait_ms is not None:
            changes["batch_wait_ms"] = overrides.batch.wait_ms
    return msgspec.structs.replace(spec, **changes) if changes else spec
