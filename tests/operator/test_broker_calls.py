"""The operator's calls to the broker (declaring and deleting an actor's queues) are bounded:
in time, once a call has its turn, and in number, so a cold start of many actors does not open
a connection per actor at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asya_operator import queues
from asya_operator.queues import BROKER_CALLS, declare_actor_queues, delete_actor_queues

from asya.errors import TransportError
from tests.operator.test_kube import SilentServer


@pytest.mark.parametrize("call", [declare_actor_queues, delete_actor_queues])
async def test_a_broker_that_never_completes_the_handshake_fails_the_call_at_its_bound(call):
    # A broker short of file descriptors accepts the connection and never answers: the
    # reconcile waited for ever, and said nothing.
    server = SilentServer()
    try:
        with pytest.raises(TransportError, match=r"did not answer within 0\.5 s"):
            await call(f"amqp://guest:guest@127.0.0.1:{server.port}/", "ns", "a", timeout_s=0.5)
    finally:
        server.close()


class HeldTransports:
    """Stands for `queues._transport`: each connection is held open until released."""

    def __init__(self) -> None:
        self.open = 0
        self.most = 0
        self.release = asyncio.Event()
        self.full = asyncio.Event()

    def __call__(self, amqp_url: str, namespace: str) -> Any:
        return self

    async def __aenter__(self) -> HeldTransports:
        self.open += 1
        self.most = max(self.most, self.open)
        if self.open == BROKER_CALLS:
            self.full.set()
        await self.release.wait()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.open -= 1

    async def declare(self, name: str) -> None:
        pass


async def test_at_most_so_many_broker_connections_are_open_at_once(monkeypatch):
    held = HeldTransports()
    monkeypatch.setattr(queues, "_transport", held)

    # When: three times as many actors as the bound are declared together
    calls = [
        asyncio.ensure_future(declare_actor_queues("amqp://x/", "ns", f"a{i}"))
        for i in range(3 * BROKER_CALLS)
    ]
    async with asyncio.timeout(5):  # a bound on a hang
        await held.full.wait()
    await asyncio.sleep(0)  # one more turn of the loop: a call past the bound would enter now
    most_while_held = held.most
    held.release.set()
    await asyncio.gather(*calls)

    # Then
    assert most_while_held == BROKER_CALLS
    assert held.most == BROKER_CALLS
    assert held.open == 0
