"""Testing actors from pytest: build a `Context`, call one actor exactly as asya would.

`make_context` builds the `Context` a handler receives, for calling a decorated function
directly. `call_actor` (and `acall_actor` inside an event loop) runs a handler through
`asya.handler.LocalInvoker`, the code the runtime's workers and `asya dev` run, and returns
what it emitted or how it failed, so a test sees the same outcome a pipeline would. No broker,
no environment, no registry lookups: the handler is passed in.

    from asya.testing import call_actor, make_context

    def test_a_low_score_is_sent_for_refinement():
        result = call_actor(judge, {"score": 0.2}, context=make_context(route=["judge", "store"]))

        assert result.failure is None
        assert [(o.payload, o.next) for o in result.outputs] == [
            ({"score": 0.2}, ("refine", "judge", "store")),
        ]

    def test_judge_called_directly():
        ctx = make_context(route=["judge", "store"], headers={"tenant": "a"})

        judge({"score": 0.2}, ctx)

        assert ctx.route.next == ["refine", "judge", "store"]
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asya.actor import build_spec, spec_of
from asya.context import Context
from asya.envelope import Envelope, Payload, Route, Status
from asya.handler import LocalInvoker
from asya.outcome import Emitted, Failure

DEFAULT_ACTOR = "actor-under-test"
"""The actor a context made without a route is for."""


def make_context(
    *,
    route: Sequence[str] = (DEFAULT_ACTOR,),
    prev: Sequence[str] = (),
    headers: dict[str, str] | None = None,
    attempt: int = 1,
    max_attempts: int | None = None,
    id: str = "test-envelope",
    parent_id: str | None = None,
    deadline_at: datetime | None = None,
) -> Context:
    """A `Context` for a call at `route[0]`, with `route[1:]` still to come.

    `prev` is where the envelope has been. Handlers see it as they would in a pipeline: only
    `headers` and `route.next` are writable.

    Raises:
        EnvelopeError: the route is empty or names an invalid actor.
    """
    curr, *rest = route or ("",)
    envelope = Envelope(
        id=id,
        parent_id=parent_id,
        route=Route(prev=tuple(prev), curr=curr, next=tuple(rest)),
        headers=dict(headers or {}),
        status=Status(attempt=attempt, max_attempts=max_attempts, deadline_at=deadline_at),
    )
    return Context.from_envelope(envelope, max_attempts)


@dataclass(frozen=True, kw_only=True)
class CallResult:
    """What one call produced: the payloads it emitted, or the failure asya would record."""

    outputs: tuple[Emitted, ...] = ()
    """Each emitted payload with the `next` and headers it leaves with; none means the
    envelope ends here (the handler returned None)."""
    fan_out: bool = False
    """True when the handler was a generator: each output becomes a child envelope."""
    failure: Failure | None = None
    """Why the call failed (reason, exception type, message, retryable, traceback), or None."""

    @property
    def payloads(self) -> list[Payload]:
        """The emitted payloads alone, in order."""
        return [output.payload for output in self.outputs]


async def acall_actor(
    handler: Any, payload: Payload, *, context: Context | None = None
) -> CallResult:
    """Run `handler` (decorated or not) on `payload` as asya would; await it in async tests.

    The call gets a fresh copy of `context` (default: a context at the actor's name), and the
    actor's own options: its timeout, its retry policy (which decides `failure.retryable` and
    `ctx.max_attempts`). A batch actor is called with a batch of one.

    Raises:
        ActorDefinitionError: the handler cannot be an actor, or its class's `__init__` raised.
    """
    spec = spec_of(handler) or build_spec(handler, {})
    ctx = context if context is not None else make_context(route=(spec.name,))
    invoker = LocalInvoker(spec)
    try:
        [outcome] = await invoker.invoke([_envelope_for(ctx, payload)])
    finally:
        await invoker.aclose()
    if isinstance(outcome, Failure):
        return CallResult(failure=outcome)
    return CallResult(outputs=outcome.outputs, fan_out=outcome.fan_out)


def call_actor(handler: Any, payload: Payload, *, context: Context | None = None) -> CallResult:
    """`acall_actor` for synchronous tests: runs the call on a fresh event loop.

    Raises:
        RuntimeError: called inside a running event loop; `await acall_actor(...)` there.
        ActorDefinitionError: as for `acall_actor`.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(acall_actor(handler, payload, context=context))
    raise RuntimeError("call_actor cannot run inside an event loop: use await acall_actor(...)")


def _envelope_for(ctx: Context, payload: Payload) -> Envelope:
    return Envelope(
        id=ctx.id,
        parent_id=ctx.parent_id,
        route=Route(prev=ctx.route.prev, curr=ctx.route.curr, next=tuple(ctx.route.next)),
        headers=dict(ctx.headers),
        status=Status(
            attempt=ctx.attempt, max_attempts=ctx.max_attempts, deadline_at=ctx.deadline_at
        ),
        payload=payload,
    )
