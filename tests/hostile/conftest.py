"""The hostile-input suite's fixtures: real pods on the real broker, a feeder that puts raw
bytes on an actor's queue and accounts for every one, and a closing line with the totals.

Each feed ends with a liveness probe: a good envelope sent after every input was accounted
for, which must reach `happy-end` (the consumer survived and still serves).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import aio_pika
import pytest

from tests.hostile.accounting import Hostile, Tally, record_key, tally, valid

HANDLERS = """
from asya import Context, actor

@actor(concurrency=8)
def echo(doc):
    return doc

@actor(concurrency=16)
def router(doc, ctx: Context):
    ctx.route.next = [doc["to"]]
    return doc

@actor(batch=8, batch_wait_ms=500)
def batcher(docs):
    return [object() if isinstance(d, dict) and d.get("poison") else d for d in docs]
"""

WAIT_S = 30
"""Longest a feed waits for its inputs to be recorded (a lost input shows as lost after it)."""


@dataclass
class Totals:
    tried: int = 0
    recorded: int = 0
    lost: int = 0
    duplicated: int = 0
    wrong: int = 0
    probes: int = 0
    probes_served: int = 0


TOTALS = pytest.StashKey[Totals]()


class Feeder:
    """Puts inputs on actors' queues and accounts for them at the end actors."""

    def __init__(self, transport, finals, pods, totals: Totals, actor_names: set[str]) -> None:
        self.transport = transport
        self._actor_names = actor_names
        self.finals = finals
        self._pods = pods
        self._totals = totals
        self.cluster = None

    async def start(self, *actors: str) -> None:
        self.cluster = await self._pods(HANDLERS, *actors)

    async def declare_idle(self, actor: str) -> None:
        """A queue for `actor` that nobody consumes (deleted after the test)."""
        self._actor_names.add(actor)
        await self.transport.declare(actor)

    async def publish(self, actor: str, item: Hostile) -> None:
        if not item.properties:
            await self.transport.publish(actor, item.body)
            return
        channel = await self.transport.open_channel()
        try:
            exchange = await channel.get_exchange("asya")
            await exchange.publish(
                aio_pika.Message(item.body, **item.properties),
                routing_key=self.transport.queue_for(actor),
                mandatory=True,
            )
        finally:
            await channel.close()

    async def feed(self, actor: str, inputs: list[Hostile], *, probe: str | None = None) -> Tally:
        """Publish every input at once, wait for all to be recorded, then probe `probe`."""
        await asyncio.gather(*(self.publish(actor, item) for item in inputs))
        return await self.account(inputs, probe=probe or actor)

    async def account(self, inputs: list[Hostile], *, probe: str) -> Tally:
        """Wait until every input is recorded, probe the actor, and tally (totals included)."""
        assert len({item.label for item in inputs}) == len(inputs), "labels must be unique"
        await self._wait(lambda: all(item.keys.keys() & self._recorded_keys() for item in inputs))
        liveness = valid("probe", probe, {"probe": True, "to": "echo"})
        await self.transport.publish(probe, liveness.body)
        served = await self._wait(lambda: liveness.key in self._recorded_keys())
        result = tally(inputs, [e for e in self.finals.envelopes if e.id != liveness.key])
        self._add(result, served=served)
        if result.problems or not served:
            print("\n".join(result.problems))
            print(self.cluster.logs() if self.cluster is not None else "no pods")
        assert served, "the liveness probe sent after the inputs never reached happy-end"
        assert [e.status.phase.value for e in self.finals.envelopes if e.id == liveness.key] == [
            "succeeded"
        ]
        return result

    def _recorded_keys(self) -> set[str]:
        return {record_key(e) for e in self.finals.envelopes}

    async def _wait(self, done) -> bool:
        try:
            await self.finals.wait_until(done, WAIT_S)
        except TimeoutError:
            return False
        return True

    def _add(self, result: Tally, *, served: bool) -> None:
        totals = self._totals
        totals.tried += result.tried
        totals.recorded += result.tried - len(result.lost)
        totals.lost += len(result.lost)
        totals.duplicated += len(result.duplicated)
        totals.wrong += len(result.wrong)
        totals.probes += 1
        totals.probes_served += int(served)


@pytest.fixture
def feeder(request, transport, finals, pods, actor_names) -> Feeder:
    totals = request.config.stash.setdefault(TOTALS, Totals())
    return Feeder(transport, finals, pods, totals, actor_names)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    totals = config.stash.get(TOTALS, None)
    if totals is None:
        return
    terminalreporter.write_sep("=", "hostile inputs")
    terminalreporter.write_line(
        f"hostile inputs: {totals.tried} tried, {totals.recorded} recorded, {totals.lost} lost,"
        f" {totals.duplicated} recorded twice, {totals.wrong} with the wrong outcome;"
        f" liveness probes: {totals.probes} sent, {totals.probes_served} served"
    )
