"""What the chain counts, read from a real /metrics exposition after a local run."""

from __future__ import annotations

from asya import RetryPolicy, actor
from asya.errors import TransportError
from asya.metrics import Metrics
from asya.routing import HAPPY_END
from asya.transport.memory import MemoryTransport
from tests.unit.metrics.run import run_mesh, scrape, value


class RefusesFirstPublish(MemoryTransport):
    """Does not confirm the first publish to `target`, as a broker losing its channel."""

    def __init__(self, target: str) -> None:
        super().__init__()
        self._target = target
        self.refused = 0

    async def publish(self, actor, body, *, delay_ms=0):
        if actor == self._target and self.refused == 0:
            self.refused += 1
            raise TransportError("publish was not confirmed")
        await super().publish(actor, body, delay_ms=delay_ms)


async def test_outcomes_retries_requeues_redeliveries_and_arrivals_are_counted():
    @actor(retry=RetryPolicy(max_attempts=3, base_delay_ms=1, jitter=0))
    def a(doc):
        if doc["n"] == 0:
            raise ValueError("zero")
        return doc

    metrics = Metrics()

    await run_mesh(
        [{"n": n} for n in range(5)],
        ["a"],
        transport=RefusesFirstPublish(HAPPY_END),
        metrics=metrics,
    )

    s = scrape(metrics)
    envelopes = "asya_envelopes_total"
    assert value(s, envelopes, actor="a", outcome="succeeded", reason="") == 4
    assert value(s, envelopes, actor="a", outcome="retried", reason="HandlerError") == 2
    assert value(s, envelopes, actor="a", outcome="failed", reason="HandlerError") == 1
    assert value(s, envelopes, actor="a", outcome="requeued", reason="") == 1
    assert value(s, "asya_redeliveries_total", actor="a") == 1
    assert value(s, "asya_processing_seconds_count", actor="a") == 7
    assert value(s, "asya_queue_wait_seconds_count", actor="a") == 8
    assert value(s, "asya_end_arrivals_total", actor="happy-end", reason="") == 4
    assert value(s, "asya_end_arrivals_total", actor="error-end", reason="HandlerError") == 1
    assert value(s, "asya_inflight", actor="a") == 0
    assert value(s, "asya_publish_pending", actor="a") == 0


async def test_bytes_that_are_no_envelope_are_failed_with_their_reason_before_user_code():
    @actor
    def a(doc):
        return doc

    metrics = Metrics()

    await run_mesh([], ["a"], metrics=metrics, raw=[b"not json"])

    s = scrape(metrics)
    failed = value(
        s, "asya_envelopes_total", actor="a", outcome="failed", reason="MalformedEnvelope"
    )
    assert failed == 1
    assert value(s, "asya_queue_wait_seconds_count", actor="a") == 0
    assert value(s, "asya_end_arrivals_total", actor="error-end", reason="MalformedEnvelope") == 1
