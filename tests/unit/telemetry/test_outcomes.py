"""A span ends with the step's outcome: failures and refusals are errors, with their reason."""

from __future__ import annotations

from datetime import timedelta

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from asya import PermanentError, actor
from asya.envelope import Reason
from asya.routing import ERROR_END
from asya.telemetry import Tracing
from tests.factories import T0, FakeClock, envelope
from tests.unit.telemetry.steps import echo, step


@pytest.fixture
def traced():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Tracing(provider.get_tracer("test")), exporter
    provider.shutdown()


async def test_a_call_that_fails_for_good_ends_its_span_as_an_error_with_the_reason(traced):
    tracing, exporter = traced

    @actor
    def refuse(doc):
        raise PermanentError("no")

    final = await step(refuse, envelope("refuse"), tracing=tracing, to=ERROR_END)

    assert final.status.reason is Reason.HANDLER_ERROR
    [span] = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["asya.outcome"] == "failed"
    assert span.attributes["asya.reason"] == "HandlerError"
    assert span.events == ()


async def test_an_envelope_refused_before_user_code_still_has_its_span(traced):
    tracing, exporter = traced
    late = envelope("echo", deadline_at=T0 - timedelta(seconds=1))

    final = await step(echo, late, tracing=tracing, clock=FakeClock(T0), to=ERROR_END)

    assert final.status.reason is Reason.DEADLINE_EXCEEDED
    [span] = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes["asya.outcome"], span.attributes["asya.reason"]) == (
        "failed",
        "DeadlineExceeded",
    )
    assert final.headers["traceparent"].split("-")[2] == f"{span.context.span_id:016x}"


async def test_bytes_that_are_not_an_envelope_get_no_span_and_still_reach_error_end(traced):
    tracing, exporter = traced

    final = await step(echo, b"{not json", tracing=tracing, to=ERROR_END)

    assert final.status.reason is Reason.MALFORMED_ENVELOPE
    assert exporter.get_finished_spans() == ()
