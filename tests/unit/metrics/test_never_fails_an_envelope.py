"""A broken instrument is logged and ignored: every envelope still reaches its end."""

from __future__ import annotations

from asya import actor
from asya.metrics import Metrics
from tests.unit.metrics.run import run_mesh


class Broken:
    def labels(self, *values, **labels):
        raise RuntimeError("instrument broken")


async def test_envelopes_reach_their_end_when_every_instrument_raises():
    @actor
    def a(doc):
        return doc

    metrics = Metrics()
    for name in vars(metrics):
        if name.startswith("_") and hasattr(getattr(metrics, name), "labels"):
            setattr(metrics, name, Broken())

    stats = await run_mesh([{"n": n} for n in range(3)], ["a"], metrics=metrics)

    assert stats.succeeded == 3
    assert stats.actor("a").envelopes == 3
