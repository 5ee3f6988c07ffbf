"""Tracing on, into memory: the spans a test's pipeline produced, finished ones only."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from asya import telemetry


@pytest.fixture
def spans():
    """Installs tracing for the test (consumers started during it use it); yields the
    exporter: `spans.get_finished_spans()`."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.install(telemetry.Tracing(provider.get_tracer("test")))
    yield exporter
    telemetry.install(None)
    provider.shutdown()
