"""Tracing through real pods (runtime + sidecar processes) on a real broker: one trace per call.

Each sidecar exports with OTEL_TRACES_EXPORTER=console (one JSON line per span in its log),
flushed when it stops; the test reads the spans back from the logs.
"""

from __future__ import annotations

import json

from asya import Client

HANDLERS = """
from asya import actor, Context, RetryPolicy

@actor
def split(doc):
    for word in doc["text"].split():
        yield {"text": word}

@actor(retry=RetryPolicy(max_attempts=3, base_delay_ms=50, jitter=0))
def flaky(doc, ctx: Context):
    if ctx.attempt == 1:
        raise ConnectionError("first attempts fail")
    return doc

@actor
def upper(doc):
    return {"text": doc["text"].upper()}
"""

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def _spans(logs: str) -> list[dict]:
    spans = []
    for line in logs.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if "context" in record and "trace_id" in record["context"]:
                spans.append(record)
    return spans


async def test_a_call_through_three_pods_is_one_trace_with_its_retries_and_fan_out(
    pods, transport, finals
):
    # Given
    cluster = await pods(HANDLERS, "split", "flaky", "upper", OTEL_TRACES_EXPORTER="console")

    # When
    sent = await Client(transport).send(
        ["split", "flaky", "upper"], {"text": "a b"}, headers={"traceparent": TRACEPARENT}
    )
    found = await finals.wait_for(2)
    await cluster.stop()  # the sidecars flush their spans as they exit

    # Then
    assert sorted(e.payload["text"] for e in found) == ["A", "B"]
    spans = _spans(cluster.logs())
    assert {s["context"]["trace_id"] for s in spans} == {f"0x{TRACE_ID}"}, cluster.logs()
    by_id = {s["context"]["span_id"]: s for s in spans}
    leaves = [s for s in spans if s["name"] == "upper"]
    assert len(leaves) == 2
    for leaf in leaves:
        path, span = [], leaf
        while span is not None:
            path.append(span)
            span = by_id.get(span["parent_id"])
        path.reverse()
        assert [
            (s["name"], s["attributes"]["asya.attempt"], s["attributes"]["asya.outcome"])
            for s in path
        ] == [
            ("split", 1, "succeeded"),
            ("flaky", 1, "retried"),
            ("flaky", 2, "succeeded"),
            ("upper", 1, "succeeded"),
        ]
        assert path[0]["parent_id"] == "0x00f067aa0ba902b7"
        assert path[1]["attributes"]["asya.envelope.parent_id"] == sent
        assert [e["name"] for e in path[1]["events"]] == ["asya.retry"]
        assert all(s["resource"]["attributes"]["service.name"] == "asya-sidecar" for s in path)
