"""Testing actors from pytest: call one actor exactly as asya would, or run a whole pipeline.

`make_context` builds the `Context` a handler receives, for calling a decorated function
directly. `call_actor` (and `acall_actor` inside an event loop) runs a handler through
`asya.handler.LocalInvoker`, the code the runtime's workers and `asya dev` run, and returns
what it emitted or how it failed, so a test sees the same outcome a pipeline would. `run` (and
`arun`) runs payloads through a whole pipeline on the in-memory transport — `asya dev`'s own
runner, so retries, timeouts, fan-out, route rewrites and every `error-end` reason behave as
they do there — and returns every final envelope as `asya.client.Results`. No broker, no
environment, no registry lookups: the handlers or the app are passed in.

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

    from asya.envelope import Reason
    from asya.testing import run

    def test_long_documents_are_scored_chunk_by_chunk_and_bad_ones_fail():
        results = run("examples/quickstart", [{"text": LONG_TEXT}, {"text": 5}])

        assert [d["chunk"] for d in results.payloads] == [1, 2, 3]   # one final per chunk
        assert [f.status.reason for f in results.failed] == [Reason.HANDLER_ERROR]

`run` takes an app as `asya dev` does (a folder, a .py file or a module name, or the imported
module) or a list of decorated actors; `route` defaults to the app's ROUTE, or to the listed
actors in order. Finals come in input order, and within one input in tree order (`<id>-1`
before `<id>-2`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import ModuleType
from typing import Any

import msgspec

from asya.actor import ActorSpec, build_spec, spec_of
from asya.client import Results
from asya.clock import SystemClock
from asya.context import Context
from asya.envelope import Envelope, Payload, Route, Status, new_envelope_id
from asya.errors import ActorDefinitionError, EnvelopeError, SettingsError
from asya.handler import LocalInvoker
from asya.lineage import path_of
from asya.local.discovery import App, load_app
from asya.local.gpus import GpuMode
from asya.local.mesh import MeshOptions
from asya.local.runner import DevOptions, run_dev
from asya.outcome import Emitted, Failure, Success

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
    assert isinstance(outcome, Success), "an invoker that was not drained starts every call"
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


AppOrActors = str | ModuleType | Sequence[Any]
"""An app as `asya dev` takes it (a folder, a .py file or a module name), the imported module,
or a list of decorated actors."""


async def arun(
    app_or_actors: AppOrActors,
    payloads: Iterable[Payload],
    *,
    route: Sequence[str] | None = None,
    timeout_s: float = 60.0,
) -> Results:
    """Run each payload along `route` through the pipeline, in memory, until all are final.

    `route` defaults to the app's ROUTE, or for a list of actors to those actors in order.
    Returns every final envelope: in input order, each input's in tree order.

    Raises:
        ActorDefinitionError: the app cannot be loaded, an item of the list is not an actor,
            or an actor could not start.
        SettingsError: there is no route, or it names an actor the app does not define.
        EnvelopeError: a payload cannot be encoded as JSON.
        TimeoutError: not every envelope was final within `timeout_s`.
    """
    app = _app_of(app_or_actors)
    chosen = tuple(route) if route is not None else app.route
    if not chosen:
        raise SettingsError(
            "no route to run the payloads along: pass route=[...] or declare ROUTE = [...]"
            " in the app",
            variable="route",
            value=None,
        )
    clock, rng = SystemClock(), random.Random()
    ids: list[str] = []
    lines: list[bytes] = []
    for index, payload in enumerate(payloads, start=1):
        envelope_id = new_envelope_id(clock.now(), rng)
        ids.append(envelope_id)
        lines.append(_line(index, envelope_id, chosen, payload))
    finals: list[Envelope] = []

    async def keep(final: Envelope) -> None:
        finals.append(final)

    async with asyncio.timeout(timeout_s):
        await run_dev(
            app,
            lines,
            emit=keep,
            progress=_quiet,
            clock=clock,
            rng=rng,
            # GPU actors run in-process like the rest: a test needs no device (asya dev and
            # asya serve give each GPU worker devices of its own).
            options=DevOptions(route=chosen, mesh=MeshOptions(gpu_mode=GpuMode.IN_PROCESS)),
        )
    order = {envelope_id: index for index, envelope_id in enumerate(ids)}

    def position(final: Envelope) -> tuple[int, tuple[int, ...]]:
        root = final.id.partition("-")[0]
        return order.get(root, len(order)), path_of(final.lineage)

    return Results(tuple(sorted(finals, key=position)))


def run(
    app_or_actors: AppOrActors,
    payloads: Iterable[Payload],
    *,
    route: Sequence[str] | None = None,
    timeout_s: float = 60.0,
) -> Results:
    """`arun` for synchronous tests: runs the pipeline on a fresh event loop.

    Raises:
        RuntimeError: called inside a running event loop; `await arun(...)` there.
        and as `arun`.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(arun(app_or_actors, payloads, route=route, timeout_s=timeout_s))
    raise RuntimeError("run cannot run inside an event loop: use await arun(...)")


def _app_of(app_or_actors: AppOrActors) -> App:
    if isinstance(app_or_actors, str):
        return load_app(app_or_actors)
    if isinstance(app_or_actors, ModuleType):
        return load_app(app_or_actors.__name__)
    specs: list[ActorSpec] = []
    for item in app_or_actors:
        spec = spec_of(item)
        if spec is None:
            raise ActorDefinitionError(
                f"{item!r} is not an actor: decorate it with @actor, or pass the app's path"
            )
        specs.append(spec)
    if not specs:
        raise ActorDefinitionError("no actors to run: pass at least one decorated actor")
    return App(specs=tuple(specs), route=tuple(s.name for s in specs), search_path=None)


def _line(index: int, envelope_id: str, route: Sequence[str], payload: Payload) -> bytes:
    try:
        return msgspec.json.encode({"id": envelope_id, "route": list(route), "payload": payload})
    except (TypeError, ValueError, OverflowError) as exc:
        raise EnvelopeError(f"payload {index} cannot be encoded as JSON: {exc}") from exc


def _quiet(line: str) -> None:
    return None
