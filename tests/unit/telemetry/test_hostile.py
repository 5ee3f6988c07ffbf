"""Whatever arrives in the trace headers, the envelope is processed; tracing never fails a step."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import format_trace_id

from asya.envelope import Phase
from asya.telemetry import PUBLISHED_AT_HEADER, Tracing
from tests.factories import envelope
from tests.unit.telemetry.steps import echo, step

GARBAGE_TRACEPARENTS = [
    "",
    "garbage",
    "00-" + "0" * 32 + "-" + "0" * 16 + "-01",  # all-zero ids are invalid
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",  # no flags
    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff is forbidden
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",  # upper case
    "00-ü" + "a" * 31 + "-00f067aa0ba902b7-01",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n00-x",
    "\x00" * 55,
    "00-" * 200_000,
]

GARBAGE_TRACESTATES = ["=", "a=b=c,,,=,", "ü=ü", ",".join(f"k{i}=v" for i in range(10_000))]

GARBAGE_PUBLISHED_AT = [
    "yesterday",
    "9999-99-99",
    "2026-01-01T00:00:00",  # no timezone
    "0001-01-01T00:00:00+00:00",
    "9999-12-31T23:59:59+00:00",
    "2026-01-01T00:00:00+23:59",
    "1" * 100_000,
]


@pytest.fixture
def traced():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Tracing(provider.get_tracer("test")), exporter
    provider.shutdown()


@pytest.mark.parametrize("value", GARBAGE_TRACEPARENTS, ids=lambda v: repr(v[:40]))
async def test_a_garbage_traceparent_starts_a_new_trace_and_the_envelope_goes_on(traced, value):
    tracing, exporter = traced

    final = await step(echo, envelope("echo", headers={"traceparent": value}), tracing=tracing)

    assert final.status.phase is Phase.SUCCEEDED
    assert final.payload == {"n": 1}
    [span] = exporter.get_finished_spans()
    assert span.parent is None
    trace_id = format_trace_id(span.context.trace_id)
    assert final.headers["traceparent"].startswith(f"00-{trace_id}-")


@pytest.mark.parametrize("value", GARBAGE_TRACESTATES, ids=lambda v: repr(v[:40]))
async def test_a_garbage_tracestate_is_dropped_and_the_envelope_goes_on(traced, value):
    tracing, exporter = traced
    headers = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}

    final = await step(
        echo, envelope("echo", headers={**headers, "tracestate": value}), tracing=tracing
    )

    assert final.status.phase is Phase.SUCCEEDED
    assert "tracestate" not in final.headers
    assert len(exporter.get_finished_spans()) == 1


@pytest.mark.parametrize("value", GARBAGE_PUBLISHED_AT, ids=lambda v: repr(v[:40]))
async def test_a_garbage_published_at_is_ignored_and_the_envelope_goes_on(traced, value):
    tracing, exporter = traced

    final = await step(
        echo, envelope("echo", headers={PUBLISHED_AT_HEADER: value}), tracing=tracing
    )

    assert final.status.phase is Phase.SUCCEEDED
    [span] = exporter.get_finished_spans()
    assert span.attributes.get("asya.queue_wait_ms", 0.0) >= 0.0


class _BrokenTracer:
    def start_span(self, *args, **kwargs):
        raise RuntimeError("the tracer is broken")


class _BrokenSpan:
    def __getattr__(self, name):
        raise RuntimeError("the span is broken")


class _TracerOfBrokenSpans:
    def start_span(self, *args, **kwargs):
        return _BrokenSpan()


@pytest.mark.parametrize("tracer", [_BrokenTracer(), _TracerOfBrokenSpans()])
async def test_a_tracer_that_fails_never_fails_or_loses_the_envelope(tracer):
    final = await step(echo, envelope("echo"), tracing=Tracing(tracer))

    assert final.status.phase is Phase.SUCCEEDED
    assert final.payload == {"n": 1}
