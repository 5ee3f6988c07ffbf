"""Testing actors from pytest: call one actor exactly as asya would, or run a whole pipeline.

`make_context` builds the `Context` a handler receives, for calling a decorated function
directly. `call_actor` (and `acall_actor` inside an event loop) runs a handler through
`asya.handler.LocalInvoker`, the code the runtime's workers and `asya dev` run, with its input
and outputs encoded and size-checked as a pipeline does them, and returns what it emitted or how
it failed, so a test sees the same outcome a pipeline would: an output JSON cannot carry
faithfully (NaN, a set, bytes, a date, a numpy value) fails as `InvalidOutput`, naming its place
(`payload.scores[3]`), and one over the payload limit as `PayloadTooLarge`. A batch actor is
called with the batch it is given (`call_actor(embed, [d1, d2])`). `run` (and `arun`) runs
payloads through a whole pipeline on the in-memory transport — `asya dev`'s own runner, so
retries, timeouts, fan-out, route rewrites and every `error-end` reason behave as they do there,
except that retries happen at once (`backoff=True` waits their delays) — and returns every final
envelope as `asya.client.Results`. No broker, no environment, no registry lookups: the handlers
or the app are passed in.

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

    def test_embed_takes_a_batch():
        result = call_actor(embed, [{"text": "a"}, {"text": "b"}])   # a batch actor

        assert result.failure is None                  # a numpy output would be InvalidOutput
        assert [len(p["vector"]) for p in result.payloads] == [384, 384]

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
import dataclasses
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
from asya.envelope import (
    Envelope,
    Limits,
    Payload,
    Route,
    Status,
    check_payload,
    encode_payload,
    new_envelope_id,
)
from asya.errors import ActorDefinitionError, EnvelopeError, SettingsError
from asya.handler import LocalInvoker
from asya.lineage import path_of
from asya.local.discovery import App, load_app
from asya.local.gpus import GpuMode
from asya.local.mesh import MeshOptions
from asya.local.runner import DevOptions, run_dev
from asya.outcome import Emitted, Failure, Outcome, Success, unsendable_output

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
    """Each emitted payload, as the next actor receives it (encoded as JSON and decoded: a
    tuple arrives as a list), with the `next` and headers it leaves with; none means the
    envelope ends here (the handler returned None). For a batch, every item's, in order."""
    fan_out: bool = False
    """True when the handler was a generator: each output becomes a child envelope."""
    failure: Failure | None = None
    """Why the call failed (reason, exception type, message, retryable, traceback), or None.
    An output JSON cannot carry faithfully, or over the payload limit, fails as
    `InvalidOutput` / `PayloadTooLarge`, as in a pipeline; the other outputs are kept. For a
    batch: the first item's failure."""
    items: tuple[CallResult, ...] = ()
    """A batch actor's call: each item's own result, in the batch's order; empty otherwise."""

    @property
    def payloads(self) -> list[Payload]:
        """The emitted payloads alone, in order."""
        return [output.payload for output in self.outputs]


async def acall_actor(
    handler: Any,
    payload: Payload,
    *,
    context: Context | Sequence[Context] | None = None,
    limits: Limits | None = None,
) -> CallResult:
    """Run `handler` (decorated or not) on `payload` as asya would; await it in async tests.

    The payload is encoded and decoded as a pipeline sends it (and held to `limits`, default:
    `asya dev`'s, 4 MiB), the call runs with the actor's own options (its timeout; its retry
    policy, which decides `failure.retryable` and `ctx.max_attempts`), and each output is
    encoded as a pipeline encodes it: one that JSON does not carry faithfully (NaN, a set,
    bytes, a date, a numpy value) fails the call as `InvalidOutput`, one over the limit as
    `PayloadTooLarge`.
    The call gets a fresh copy of `context` (default: a context at the actor's name).

    A batch actor takes the batch: `payload` is the list of payloads (at most its `batch`),
    the handler is called once with all of them, and `items` holds each one's result.
    `context` may then be one context per item.

    Raises:
        ActorDefinitionError: the handler cannot be an actor, or its class's `__init__` raised.
        EnvelopeError: a payload cannot be sent (what a client's send raises); the message
            names its place (`payload.scores[3]`, for a batch `payload[1].scores[3]`).
        PayloadTooLargeError: a payload is over `limits.max_payload_bytes`.
        TypeError, ValueError: a batch actor was not given a list of 1 to `batch` payloads,
            or the contexts do not match the payloads.
    """
    spec = spec_of(handler) or build_spec(handler, {})
    chosen = limits if limits is not None else Limits()
    if spec.batch is None:
        batch = [payload]
        contexts = [_single_context(spec, context)]
    else:
        batch = _batch_of(spec, payload)
        contexts = _batch_contexts(spec, context, len(batch))
    roots = ["payload"] if spec.batch is None else [f"payload[{i}]" for i in range(len(batch))]
    envelopes = [
        _envelope_for(ctx, _as_sent(item, chosen, root))
        for item, ctx, root in zip(batch, contexts, roots, strict=True)
    ]
    invoker = LocalInvoker(spec)
    try:
        outcomes = await invoker.invoke(envelopes)
    finally:
        await invoker.aclose()
    results = [_result_of(spec, outcome, chosen) for outcome in outcomes]
    if spec.batch is None:
        return results[0]
    return CallResult(
        outputs=tuple(output for result in results for output in result.outputs),
        failure=next((r.failure for r in results if r.failure is not None), None),
        items=tuple(results),
    )


def call_actor(
    handler: Any,
    payload: Payload,
    *,
    context: Context | Sequence[Context] | None = None,
    limits: Limits | None = None,
) -> CallResult:
    """`acall_actor` for synchronous tests: runs the call on a fresh event loop.

    Raises:
        RuntimeError: called inside a running event loop; `await acall_actor(...)` there.
        and as `acall_actor`.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(acall_actor(handler, payload, context=context, limits=limits))
    raise RuntimeError("call_actor cannot run inside an event loop: use await acall_actor(...)")


def _single_context(spec: ActorSpec, context: Context | Sequence[Context] | None) -> Context:
    if context is None:
        return make_context(route=(spec.name,))
    if isinstance(context, Context):
        return context
    raise TypeError(
        f"'{spec.name}' is not a batch actor: pass one context (context=make_context(...)),"
        " not a list"
    )


def _batch_of(spec: ActorSpec, payload: Payload) -> list[Payload]:
    size = spec.batch
    assert size is not None
    if not isinstance(payload, list | tuple):
        raise TypeError(
            f"'{spec.name}' is a batch actor: pass the batch, a list of payloads"
            f" ([payload] for a batch of one), got {type(payload).__name__}"
        )
    if not 1 <= len(payload) <= size:
        raise ValueError(
            f"'{spec.name}' is called with 1 to {size} payloads at once (batch={size}),"
            f" got {len(payload)}"
        )
    return list(payload)


def _batch_contexts(
    spec: ActorSpec, context: Context | Sequence[Context] | None, count: int
) -> list[Context]:
    if context is None or isinstance(context, Context):
        return [_single_context(spec, context)] * count
    if len(context) != count:
        raise ValueError(
            f"a batch of {count} payloads takes one context per payload, got {len(context)}"
        )
    return list(context)


def _as_sent(payload: Payload, limits: Limits, root: str) -> Payload:
    """`payload` as the actor receives it: encoded for the wire and decoded."""
    return msgspec.json.decode(encode_payload(payload, limits, root=root))


def _result_of(spec: ActorSpec, outcome: Outcome, limits: Limits) -> CallResult:
    if isinstance(outcome, Failure):
        return CallResult(failure=outcome)
    assert isinstance(outcome, Success), "an invoker that was not drained starts every call"
    outputs: list[Emitted] = []
    failure = None
    for output in outcome.outputs:
        try:
            sent = _as_sent(output.payload, limits, "payload")
        except EnvelopeError as exc:  # as the consumer does: this output fails, others go on
            failure = failure or unsendable_output(spec.name, exc)
            continue
        outputs.append(msgspec.structs.replace(output, payload=sent))
    return CallResult(outputs=tuple(outputs), fan_out=outcome.fan_out, failure=failure)


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
    backoff: bool = False,
    limits: Limits | None = None,
) -> Results:
    """Run each payload along `route` through the pipeline, in memory, until all are final.

    `route` defaults to the app's ROUTE, or for a list of actors to those actors in order.
    Failed calls are retried as each actor's policy says (as many attempts, the same errors
    retried and recorded), but at once: `backoff=True` waits each retry's delay, as `asya dev`
    does. `limits` default to `asya dev`'s (4 MiB payloads, 64 hops).
    Returns every final envelope: in input order, each input's in tree order.

    Raises:
        ActorDefinitionError: the app cannot be loaded, an item of the list is not an actor,
            or an actor could not start.
        SettingsError: there is no route, or it names an actor the app does not define.
        EnvelopeError: a payload cannot be sent; the message names its place
            (`payloads[2].scores[3]`).
        TimeoutError: not every envelope was final within `timeout_s`.
    """
    app = _app_of(app_or_actors)
    if not backoff:
        app = _without_backoff(app)
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
    for index, payload in enumerate(payloads):
        envelope_id = new_envelope_id(clock.now(), rng)
        ids.append(envelope_id)
        lines.append(_line(index, envelope_id, chosen, payload))
    finals: list[Envelope] = []

    async def keep(final: Envelope) -> None:
        finals.append(final)

    # GPU actors run in-process like the rest: a test needs no device (asya dev and asya serve
    # give each GPU worker devices of its own).
    mesh = MeshOptions(gpu_mode=GpuMode.IN_PROCESS, limits=limits or Limits())
    async with asyncio.timeout(timeout_s):
        await run_dev(
            app,
            lines,
            emit=keep,
            progress=_quiet,
            clock=clock,
            rng=rng,
            options=DevOptions(route=chosen, mesh=mesh),
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
    backoff: bool = False,
    limits: Limits | None = None,
) -> Results:
    """`arun` for synchronous tests: runs the pipeline on a fresh event loop.

    Raises:
        RuntimeError: called inside a running event loop; `await arun(...)` there.
        and as `arun`.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(
            arun(
                app_or_actors,
                payloads,
                route=route,
                timeout_s=timeout_s,
                backoff=backoff,
                limits=limits,
            )
        )
    raise RuntimeError("run cannot run inside an event loop: use await arun(...)")


def _without_backoff(app: App) -> App:
    """`app` with every actor retrying at once: the same attempts, no delay between them."""
    specs = tuple(
        msgspec.structs.replace(
            spec, retry=dataclasses.replace(spec.retry, base_delay_ms=0, max_delay_ms=0)
        )
        for spec in app.specs
    )
    return dataclasses.replace(app, specs=specs)


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
    # Held to what a pipeline sends (NaN, sets, dates fail here, named); the size is the
    # runner's to check, as for `asya dev`'s inputs.
    check_payload(payload, root=f"payloads[{index}]")
    return msgspec.json.encode({"id": envelope_id, "route": list(route), "payload": payload})


def _quiet(line: str) -> None:
    return None
