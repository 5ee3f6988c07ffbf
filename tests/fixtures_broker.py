"""Fixtures for tests against a real broker: where it is, a namespace per test, cleanup, pods."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import pytest

from asya.clock import SystemClock
from asya.crew.ends import EndActor
from asya.envelope import Envelope
from asya.errors import TransportError
from asya.routing import ERROR_END, HAPPY_END
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
from tests.broker import Cluster, check_reachable, find_broker, new_namespace, sweep_namespaces


@pytest.fixture(scope="session")
def broker():
    with find_broker() as found:
        problem = asyncio.run(check_reachable(found.url))
        if problem is not None:
            pytest.fail(problem, pytrace=False)
        yield found


@pytest.fixture
def amqp_url(broker):
    return broker.url


@pytest.fixture(scope="session")
def used_namespaces(broker):
    """Every namespace the session's tests used, with the actors they named. At the end,
    when every process a test started is gone, whatever is left in them is deleted: a queue
    that a consumer re-declared after its test's own cleanup (robust channels restore the
    queues they consumed) must not outlive the session."""
    used: dict[str, set[str]] = {}
    yield used
    asyncio.run(sweep_namespaces(broker.url, used))


@pytest.fixture
def namespace(used_namespaces):
    name = new_namespace()
    used_namespaces[name] = set()
    return name


class Finals:
    """Records what reaches happy-end and error-end, and waits for a count."""

    def __init__(self) -> None:
        self.envelopes: list[Envelope] = []
        self._changed = asyncio.Condition()

    async def record(self, envelope: Envelope) -> None:
        async with self._changed:
            self.envelopes.append(envelope)
            self._changed.notify_all()

    async def wait_for(self, count: int, timeout_s: float = 30) -> list[Envelope]:
        await self.wait_until(lambda: len(self.envelopes) >= count, timeout_s)
        return list(self.envelopes)

    async def wait_until(self, done: Callable[[], bool], timeout_s: float) -> None:
        async with asyncio.timeout(timeout_s), self._changed:
            await self._changed.wait_for(done)

    def by_id(self) -> dict[str, Envelope]:
        return {e.id: e for e in self.envelopes}


@pytest.fixture
def actor_names(namespace, used_namespaces) -> set[str]:
    """Actors a test starts in other processes: their queues are deleted after it."""
    return used_namespaces[namespace]


@pytest.fixture
async def transport(request, amqp_url, namespace, actor_names):
    """A connection named after the test, in the test's own namespace; deletes its queues."""
    options = RabbitMQOptions(namespace=namespace, connection_name=request.node.name[:100])
    opened = RabbitMQTransport(amqp_url, options)
    await opened.connect()
    yield opened
    try:
        await _delete_queues(opened, actor_names | {HAPPY_END, ERROR_END})
    finally:
        await opened.aclose()


async def _delete_queues(opened: RabbitMQTransport, actors: set[str]) -> None:
    """Sidecars declare the end actors' queues too: the namespace is the test's own, so all
    go. A test that restarted the broker may end while this connection is between two: the
    deletion waits for it, and starts again if it drops once more, for up to a minute."""
    failed: TransportError | None = None
    try:
        async with asyncio.timeout(60):
            while True:
                await opened.wait_connected()
                try:
                    await opened.delete_queues(actors)
                    return
                except TransportError as exc:
                    failed = exc
                    await asyncio.sleep(0.2)  # the drop may not have reached the client yet
    except TimeoutError as exc:
        raise (failed or exc) from exc


@pytest.fixture
async def pods(amqp_url, namespace, tmp_path, actor_names, transport):
    """Start actors as pods (runtime + sidecar processes) from a handler module's source."""
    started: list[Cluster] = []

    async def start(handlers: str, *actors: str, **env: str) -> Cluster:
        running = Cluster(amqp_url, namespace, tmp_path, handlers)
        started.append(running)
        for actor in actors:
            # Topology is declared by whoever needs it first; here, the test's client.
            actor_names.add(actor)
            await transport.declare(actor)
            await running.pod(actor, f"handlers_it:{actor.replace('-', '_')}", **env).start()
        return running

    yield start
    for running in started:
        await running.stop()


@pytest.fixture
async def finals(transport):
    """In-test end actors that record every final envelope."""
    record = Finals()
    ends = [
        EndActor(name, transport=transport, sink=record, clock=SystemClock(), rng=random.Random())
        for name in (HAPPY_END, ERROR_END)
    ]
    for end in ends:
        await transport.declare(end.name)
        await end.start()
    yield record
    for end in ends:
        await end.stop(1)
