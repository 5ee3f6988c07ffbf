"""GET /metrics from a real pod (runtime + sidecar processes) after a run with known outcomes."""

from __future__ import annotations

import asyncio
import socket

from prometheus_client.parser import text_string_to_metric_families

from asya import Client

HANDLERS = """
from asya import actor, RetryPolicy

@actor(retry=RetryPolicy(max_attempts=2, base_delay_ms=20, jitter=0))
def judge(doc):
    if doc["fail"]:
        raise ValueError("asked to fail")
    return doc
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def scrape(port: int) -> tuple[str, dict[tuple[str, frozenset], float]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = await reader.read()
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    text = body.decode()
    samples = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    return text, samples


async def scrape_until(port: int, done, timeout_s: float = 30):
    """Scrape until `done(samples)`: a step is counted once its outputs are confirmed, which
    may be just after the test sees them arrive."""
    async with asyncio.timeout(timeout_s):
        while True:
            text, samples = await scrape(port)
            if done(samples):
                return text, samples
            await asyncio.sleep(0.05)


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_a_sidecar_serves_the_counts_of_what_it_did(pods, transport, finals):
    # Given: one envelope already delivered once and given back (it comes redelivered)
    await transport.declare("judge")
    client = Client(transport)
    await client.send(["judge"], {"fail": False})
    subscription = await transport.subscribe("judge", prefetch=1)
    held = await subscription.get()
    assert held is not None
    await subscription.requeue(held)
    await subscription.close()
    port = free_port()
    cluster = await pods(HANDLERS, "judge", ASYA_HEALTH_PORT=str(port))

    # When: 3 more succeed, 2 fail after their one retry
    for fail in (False, False, False, True, True):
        await client.send(["judge"], {"fail": fail})
    await finals.wait_for(6)
    text, s = await scrape_until(
        port,
        lambda s: (
            value(s, "asya_envelopes_total", actor="judge", outcome="failed", reason="HandlerError")
            == 2
            and value(s, "asya_envelopes_total", actor="judge", outcome="succeeded", reason="") == 4
        ),
    )

    # Then
    envelopes = "asya_envelopes_total"
    assert value(s, envelopes, actor="judge", outcome="succeeded", reason="") == 4
    assert value(s, envelopes, actor="judge", outcome="retried", reason="HandlerError") == 2
    assert value(s, envelopes, actor="judge", outcome="failed", reason="HandlerError") == 2
    assert value(s, envelopes, actor="judge", outcome="requeued", reason="") == 0
    assert value(s, "asya_redeliveries_total", actor="judge") == 1
    assert value(s, "asya_processing_seconds_count", actor="judge") == 8
    assert value(s, "asya_queue_wait_seconds_count", actor="judge") == 8
    assert value(s, "asya_inflight", actor="judge") == 0
    assert value(s, "asya_publish_pending", actor="judge") == 0
    assert value(s, "asya_runtime_up", actor="judge") == 1
    print(text)  # shown with -s: a real scrape, for the docs

    # And when the runtime dies, the sidecar says so
    cluster.pods["judge"].runtime.kill()
    await scrape_until(port, lambda s: value(s, "asya_runtime_up", actor="judge") == 0)
