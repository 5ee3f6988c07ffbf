"""A class actor's `close()`: called once when its worker stops, after its last call, whether it
is sync or async; what it raises is logged and the worker stops all the same."""

from __future__ import annotations

import asyncio
import logging
import random
import threading

import pytest

from asya import actor
from asya.actor import REGISTRY, spec_of
from asya.clock import SystemClock
from asya.envelope import Reason
from asya.errors import ActorDefinitionError
from asya.handler import LocalInvoker
from asya.local.discovery import App
from asya.local.mesh import MeshOptions
from asya.local.runner import DevOptions, run_dev
from asya.outcome import NotStarted
from asya.testing import call_actor
from tests.factories import envelope


async def test_a_sync_close_runs_once_when_the_worker_stops_after_its_calls():
    events = []

    @actor(name="x")
    class Model:
        def __init__(self):
            events.append("init")

        def __call__(self, doc):
            events.append("call")
            return doc

        def close(self):
            events.append("close")

    invoker = LocalInvoker(spec_of(Model))
    await invoker.invoke([envelope("x", ["next"])])
    await invoker.invoke([envelope("x", ["next"])])
    before = list(events)
    await invoker.aclose()
    await invoker.aclose()

    assert before == ["init", "call", "call"]
    assert events == ["init", "call", "call", "close"]


async def test_an_async_close_is_awaited():
    closed = asyncio.Event()

    @actor(name="x")
    class Client:
        async def __call__(self, doc):
            return doc

        async def close(self):
            await asyncio.sleep(0)
            closed.set()

    invoker = LocalInvoker(spec_of(Client))
    await invoker.invoke([envelope("x", ["next"])])
    await invoker.aclose()

    assert closed.is_set()


async def test_a_close_that_raises_is_logged_and_the_worker_stops(caplog):
    @actor(name="x")
    class Model:
        def __call__(self, doc):
            return doc

        def close(self):
            raise RuntimeError("the model would not unload")

    invoker = LocalInvoker(spec_of(Model))
    await invoker.invoke([envelope("x", ["next"])])
    with caplog.at_level(logging.ERROR, logger="asya.handler"):
        await invoker.aclose()

    assert "close() raised" in caplog.text
    assert "the model would not unload" in caplog.text


async def test_a_worker_that_never_started_its_instance_closes_nothing():
    @actor(name="x")
    class Model:
        def __call__(self, doc):
            return doc

        def close(self):
            raise AssertionError("closed without an instance")

    invoker = LocalInvoker(spec_of(Model))
    await invoker.aclose()


def test_a_close_that_needs_arguments_is_refused_at_the_decorator():
    with pytest.raises(ActorDefinitionError, match=r"close\(\) is called with no arguments"):

        @actor(name="x")
        class Model:
            def __call__(self, doc):
                return doc

            def close(self, force):
                pass


def test_call_actor_closes_the_instance_it_made():
    events = []

    @actor(name="x")
    class Model:
        def __call__(self, doc):
            return doc

        def close(self):
            events.append("close")

    result = call_actor(Model, {"n": 1})

    assert [o.payload for o in result.outputs] == [{"n": 1}]
    assert events == ["close"]


async def test_asya_dev_closes_every_worker_it_started_when_the_run_ends():
    made, closed = [], []

    @actor(name="a", max_replicas=3)
    class Model:
        def __init__(self):
            made.append(self)

        async def __call__(self, doc):
            await asyncio.sleep(0.001)
            return doc

        def close(self):
            closed.append(self)

    app = App(specs=tuple(REGISTRY), route=("a",), search_path=None)

    async def emit(_):
        return None

    await run_dev(
        app,
        [b'{"n": %d}' % i for i in range(40)],
        emit=emit,
        progress=lambda _: None,
        clock=SystemClock(),
        rng=random.Random(3),
        options=DevOptions(mesh=MeshOptions(poll_interval_s=0.01), progress_interval_s=0.05),
    )

    assert made
    assert sorted(map(id, closed)) == sorted(map(id, made))


async def test_close_is_not_called_while_a_call_that_ran_past_its_timeout_still_runs(caplog):
    release, events = threading.Event(), []

    @actor(name="x", timeout_s=0.05)
    class Model:
        def __call__(self, doc):
            release.wait(10)
            events.append("call-end")
            return doc

        def close(self):
            events.append("close")

    invoker = LocalInvoker(spec_of(Model))
    [outcome] = await invoker.invoke([envelope("x", ["next"])])
    with caplog.at_level(logging.WARNING, logger="asya.handler"):
        await invoker.aclose()
    release.set()

    assert outcome.reason is Reason.TIMEOUT
    assert events == []
    assert "close() not called" in caplog.text


async def test_nothing_is_made_or_run_once_closed():
    made = []

    @actor(name="x")
    class Model:
        def __init__(self):
            made.append(self)

        def __call__(self, doc):
            return doc

        def close(self):
            pass

    invoker = LocalInvoker(spec_of(Model))
    await invoker.aclose()
    outcomes = await invoker.invoke([envelope("x", ["next"])])

    assert outcomes == [NotStarted()]
    assert made == []


async def test_a_close_while_init_runs_waits_for_it_and_closes_what_it_made():
    in_init, release, events = threading.Event(), threading.Event(), []

    @actor(name="x")
    class Model:
        def __init__(self):
            in_init.set()
            release.wait(10)
            events.append("init")

        def __call__(self, doc):
            return doc

        def close(self):
            events.append("close")

    invoker = LocalInvoker(spec_of(Model))
    starting = asyncio.create_task(invoker.start())
    await asyncio.to_thread(in_init.wait, 10)
    closing = asyncio.create_task(invoker.aclose())
    await asyncio.sleep(0)
    release.set()
    await starting
    await closing

    assert events == ["init", "close"]


async def test_a_classmethod_close_is_called_and_a_staticmethod_needing_an_argument_refused():
    events = []

    @actor(name="x")
    class Pool:
        def __call__(self, doc):
            return doc

        @classmethod
        def close(cls):
            events.append(cls.__name__)

    invoker = LocalInvoker(spec_of(Pool))
    await invoker.invoke([envelope("x", ["next"])])
    await invoker.aclose()

    assert events == ["Pool"]
    with pytest.raises(ActorDefinitionError, match=r"it requires force"):

        @actor(name="y")
        class Model:
            def __call__(self, doc):
                return doc

            @staticmethod
            def close(force):
                pass


def test_a_close_with_a_required_keyword_only_argument_is_refused():
    with pytest.raises(ActorDefinitionError, match=r"it requires force"):

        @actor(name="x")
        class Model:
            def __call__(self, doc):
                return doc

            def close(self, *, force):
                pass
