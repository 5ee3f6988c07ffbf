"""The trace context travels in the envelope's headers: each hop continues the one it gets."""

from __future__ import annotations

from datetime import timedelta

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from asya import Context, actor
from asya.telemetry import PUBLISHED_AT_HEADER, Tracing, queue_wait_ms
from tests.factories import T0, FakeClock, envelope
from tests.unit.telemetry.steps import echo, step

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{SPAN_ID}-01"


@pytest.fixture
def traced():
    """A tracing of the test's own (nothing installed) and its exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Tracing(provider.get_tracer("test")), exporter
    provider.shutdown()


async def test_the_span_of_a_call_is_a_child_of_the_traceparent_the_envelope_carries(traced):
    tracing, exporter = traced

    await step(echo, envelope("echo", headers={"traceparent": TRACEPARENT}), tracing=tracing)

    [span] = exporter.get_finished_spans()
    assert f"{span.context.trace_id:032x}" == TRACE_ID
    assert f"{span.parent.span_id:016x}" == SPAN_ID
    assert span.parent.is_remote


async def test_an_output_carries_the_span_of_the_call_that_sent_it_and_the_tracestate(traced):
    tracing, exporter = traced
    headers = {"traceparent": TRACEPARENT, "tracestate": "vendor=abc", "tenant": "t1"}

    final = await step(echo, envelope("echo", headers=headers), tracing=tracing)

    [span] = exporter.get_finished_spans()
    assert final.headers["traceparent"] == f"00-{TRACE_ID}-{span.context.span_id:016x}-01"
    assert final.headers["tracestate"] == "vendor=abc"
    assert final.headers["tenant"] == "t1"


async def test_user_code_sees_the_context_of_its_own_span_in_its_headers(traced):
    tracing, exporter = traced
    seen = []

    @actor
    def look(doc, ctx: Context):
        seen.append(ctx.headers["traceparent"])
        return doc

    await step(look, envelope("look", headers={"traceparent": TRACEPARENT}), tracing=tracing)

    [span] = exporter.get_finished_spans()
    assert seen == [f"00-{TRACE_ID}-{span.context.span_id:016x}-01"]


async def test_an_output_is_stamped_with_the_time_it_was_published(traced):
    tracing, _ = traced
    clock = FakeClock(T0 + timedelta(seconds=5))

    final = await step(echo, envelope("echo"), tracing=tracing, clock=clock)

    assert final.headers[PUBLISHED_AT_HEADER] == (T0 + timedelta(seconds=5)).isoformat(
        timespec="microseconds"
    )


async def test_the_queue_wait_is_from_the_previous_hops_publish_to_this_hops_start(traced):
    tracing, exporter = traced
    published = T0 - timedelta(seconds=2.5)
    headers = {PUBLISHED_AT_HEADER: published.isoformat()}

    await step(echo, envelope("echo", headers=headers), tracing=tracing, clock=FakeClock(T0))

    [span] = exporter.get_finished_spans()
    assert span.attributes["asya.queue_wait_ms"] == 2500.0


def test_without_a_published_at_the_queue_wait_is_from_when_the_envelope_was_routed():
    # factories' envelopes were last updated at T0
    assert queue_wait_ms(envelope("echo"), T0 + timedelta(milliseconds=40)) == 40.0


def test_a_publisher_clock_ahead_of_ours_never_makes_the_queue_wait_negative():
    sent = envelope("echo", headers={PUBLISHED_AT_HEADER: (T0 + timedelta(seconds=3)).isoformat()})

    assert queue_wait_ms(sent, T0) == 0.0


async def test_the_span_says_which_actor_attempt_and_envelope_and_how_the_step_ended(traced):
    tracing, exporter = traced

    await step(echo, envelope("echo", id="doc-2", parent_id="doc", attempt=2), tracing=tracing)

    [span] = exporter.get_finished_spans()
    assert span.name == "echo"
    assert {k: v for k, v in span.attributes.items() if k != "asya.queue_wait_ms"} == {
        "asya.actor": "echo",
        "asya.attempt": 2,
        "asya.envelope.id": "doc-2",
        "asya.envelope.parent_id": "doc",
        "asya.outcome": "succeeded",
    }
