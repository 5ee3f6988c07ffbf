"""How each kind of handler is called, and what its result becomes."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from asya import Context, PermanentError, actor
from asya.actor import spec_of
from asya.envelope import Reason
from asya.errors import ActorDefinitionError
from asya.handler import LocalInvoker, load_handler
from asya.outcome import Emitted, Failure, Success
from asya.retry import RetryPolicy
from tests.factories import envelope


async def call(target, *envelopes, **invoker_options):
    invoker = LocalInvoker(spec_of(target), **invoker_options)
    try:
        return await invoker.invoke(list(envelopes or [envelope("x", ["next"])]))
    finally:
        await invoker.aclose()


async def test_a_sync_function_returns_the_next_payload_along_the_route():
    @actor(name="x")
    def double(doc):
        return {"n": doc["n"] * 2}

    assert await call(double) == [Success(outputs=(Emitted(payload={"n": 2}, next=("next",)),))]


async def test_an_async_function_is_awaited():
    @actor(name="x")
    async def double(doc):
        await asyncio.sleep(0)
        return {"n": doc["n"] * 2}

    [outcome] = await call(double)

    assert outcome.outputs[0].payload == {"n": 2}


async def test_returning_none_means_no_outputs():
    @actor(name="x")
    def drop(doc):
        return None

    assert await call(drop) == [Success()]


async def test_a_context_exposes_ids_attempt_and_lets_the_handler_rewrite_next():
    seen = {}

    @actor(name="x", retry=RetryPolicy(max_attempts=4))
    def judge(doc, ctx: Context):
        seen.update(
            id=ctx.id,
            actor=ctx.actor,
            attempt=ctx.attempt,
            max=ctx.max_attempts,
            prev=ctx.route.prev,
        )
        ctx.route.next[:0] = ["refine"]
        ctx.headers["verdict"] = "low"
        return doc

    [outcome] = await call(judge, envelope("x", ["store"], ["a"], id="e9", attempt=2))

    assert seen == {"id": "e9", "actor": "x", "attempt": 2, "max": 4, "prev": ("a",)}
    assert outcome.outputs[0].next == ("refine", "store")
    assert outcome.outputs[0].headers == {"verdict": "low"}


async def test_a_generator_fans_out_with_the_route_as_it_was_at_each_yield():
    @actor(name="x")
    def split(doc, ctx):
        for i in range(3):
            ctx.route.next = ["odd"] if i % 2 else ["even"]
            yield i

    [outcome] = await call(split)

    assert outcome.fan_out is True
    assert [(o.payload, o.next) for o in outcome.outputs] == [
        (0, ("even",)),
        (1, ("odd",)),
        (2, ("even",)),
    ]


async def test_an_async_generator_fans_out_too():
    @actor(name="x")
    async def split(doc):
        for i in range(2):
            yield i

    [outcome] = await call(split)

    assert [o.payload for o in outcome.outputs] == [0, 1]


async def test_a_class_is_instantiated_once_per_worker_and_called_per_envelope():
    inits = []

    @actor(name="x")
    class Model:
        def __init__(self):
            inits.append(1)
            self.bias = 10

        def __call__(self, doc):
            return doc["n"] + self.bias

    outcomes = await call(Model, envelope("x", id="a"), envelope("x", id="b"))

    assert [o.outputs[0].payload for o in outcomes] == [11, 11]
    assert inits == [1]


async def test_a_class_whose_init_raises_fails_to_start_with_the_cause():
    @actor(name="x")
    class Broken:
        def __init__(self):
            raise OSError("model file missing")

        def __call__(self, doc):
            return doc

    invoker = LocalInvoker(spec_of(Broken))
    with pytest.raises(ActorDefinitionError, match="model file missing"):
        await invoker.start()
    await invoker.aclose()


async def test_a_batch_handler_gets_a_list_and_each_result_goes_its_own_way():
    sizes = []

    @actor(name="x", batch=4)
    def embed(docs):
        sizes.append(len(docs))
        return [None if d["n"] == 2 else {"v": d["n"]} for d in docs]

    outcomes = await call(embed, *(envelope("x", payload={"n": n}, id=str(n)) for n in (1, 2, 3)))

    assert sizes == [3]
    assert outcomes[0].outputs[0].payload == {"v": 1}
    assert outcomes[1] == Success()
    assert outcomes[2].outputs[0].payload == {"v": 3}


async def test_a_batch_handler_returning_the_wrong_count_fails_every_item_permanently():
    @actor(name="x", batch=4)
    def embed(docs):
        return docs[:1]

    outcomes = await call(embed, envelope("x", id="a"), envelope("x", id="b"))

    assert {o.reason for o in outcomes} == {Reason.INVALID_OUTPUT}
    assert not any(o.retryable for o in outcomes)
    assert "got 2 payloads" in outcomes[0].message


async def test_an_exception_becomes_a_failure_with_type_message_and_traceback():
    @actor(name="x", retry=RetryPolicy(never_retry=(KeyError,)))
    def fails(doc):
        raise ValueError("bad input")

    [outcome] = await call(fails)

    assert isinstance(outcome, Failure)
    assert (outcome.reason, outcome.type, outcome.message) == (
        Reason.HANDLER_ERROR,
        "builtins.ValueError",
        "bad input",
    )
    assert outcome.retryable is True
    assert 'raise ValueError("bad input")' in outcome.traceback


async def test_a_permanent_error_is_not_retryable():
    @actor(name="x")
    def refuses(doc):
        raise PermanentError("cannot ever work")

    [outcome] = await call(refuses)

    assert outcome.retryable is False


async def test_an_async_handler_past_its_timeout_is_cancelled_and_reported():
    cancelled = asyncio.Event()

    @actor(name="x", timeout_s=0.05)
    async def hangs(doc):
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    [outcome] = await call(hangs)

    assert outcome.reason is Reason.TIMEOUT
    assert "ran past its timeout of 0.05 s" in outcome.message
    assert cancelled.is_set()


async def test_a_stuck_sync_handler_is_reported_and_its_thread_abandoned_not_awaited():
    release = threading.Event()
    abandoned = []

    @actor(name="x", timeout_s=0.05, retry=RetryPolicy(retry_timeouts=False))
    def stuck(doc):
        release.wait(10)
        return doc

    started = time.monotonic()
    [outcome] = await call(stuck, on_abandon=lambda: abandoned.append(True))
    waited = time.monotonic() - started
    release.set()

    assert outcome.reason is Reason.TIMEOUT
    assert outcome.retryable is False
    assert abandoned == [True]
    assert waited < 5  # did not wait for the thread (bounded, not a timing claim)


def test_a_handler_reference_loads_its_spec_or_says_what_is_wrong(tmp_path, monkeypatch):
    (tmp_path / "mod_ref.py").write_text(
        "from asya import actor\n@actor(timeout_s=7)\ndef step(doc):\n    return doc\n"
        "def plain(doc):\n    return doc\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    assert load_handler("mod_ref:step").timeout_s == 7
    assert load_handler("mod_ref:plain").name == "plain"
    with pytest.raises(ActorDefinitionError, match="must look like 'module:attr'"):
        load_handler("mod_ref.step")
    with pytest.raises(ActorDefinitionError, match="has no attribute 'nope'"):
        load_handler("mod_ref:nope")
    with pytest.raises(ActorDefinitionError, match="cannot import handler module 'no_such_mod'"):
        load_handler("no_such_mod:x")
