"""Tracing is off unless an exporter is named: nothing recorded, nothing added, nothing imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from asya import actor, telemetry
from asya.settings import TracingSettings
from asya.testing import arun


async def test_with_tracing_off_a_pipeline_records_no_span_and_adds_no_header():
    # Given: a provider exists in the process, but no tracing is installed
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    @actor
    def split(text):
        yield from text.split()

    @actor
    def upper(word):
        return word.upper()

    # When
    results = await arun([split, upper], ["a b"])

    # Then
    assert results.payloads == ["A", "B"]
    assert exporter.get_finished_spans() == ()
    assert [final.headers for final in results] == [{}, {}]
    provider.shutdown()


def test_default_settings_set_nothing_up():
    assert telemetry.start_tracing(TracingSettings(), service_name="test") is None
    assert telemetry.installed() is None


def test_with_tracing_off_opentelemetry_is_never_imported():
    # A process of its own: this test process has imported OpenTelemetry already.
    script = textwrap.dedent(
        """
        import sys
        from asya import actor, telemetry
        from asya.settings import load_settings
        from asya.testing import run

        assert telemetry.start_tracing(load_settings({}).tracing, service_name="t") is None

        @actor
        def split(text):
            yield from text.split()

        assert run([split], ["a b"]).payloads == ["a", "b"]
        telemetry.stop_tracing()
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        """
    )

    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.strip() == "[]"
