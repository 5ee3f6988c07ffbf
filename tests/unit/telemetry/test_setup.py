"""Set up once per process from the standard OTEL_* variables; a wrong setup fails at start."""

from __future__ import annotations

import json
import sys

import pytest

from asya import actor, telemetry
from asya.errors import SettingsError
from asya.settings import TracingSettings, load_settings
from asya.testing import arun


@pytest.fixture(autouse=True)
def tracing_stopped():
    yield
    telemetry.stop_tracing()


@pytest.mark.parametrize(
    ("variables", "exporters"),
    [
        ({}, ()),
        ({"OTEL_TRACES_EXPORTER": "none"}, ()),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "console, otlp,console"}, ("console", "otlp")),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, ()),
    ],
)
def test_the_exporters_come_from_otel_traces_exporter(variables, exporters):
    assert load_settings(variables).tracing.exporters == exporters


def test_an_unknown_exporter_fails_at_start_naming_the_variable():
    with pytest.raises(SettingsError) as caught:
        load_settings({"OTEL_TRACES_EXPORTER": "jaeger"})

    assert (caught.value.variable, caught.value.value) == ("OTEL_TRACES_EXPORTER", "jaeger")


def test_asya_variables_do_not_turn_tracing_on():
    assert load_settings({"ASYA_TRACES_EXPORTER": "otlp"}).tracing.exporters == ()


async def test_the_console_exporter_writes_one_json_line_per_span_on_stderr(capsys):
    settings = TracingSettings(traces_exporter="console", service_name="my-app")
    assert telemetry.start_tracing(settings, service_name="asya-dev") is telemetry.installed()

    @actor
    def upper(word):
        return word.upper()

    await arun([upper], ["a"])
    telemetry.stop_tracing()

    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    span = json.loads(line)
    assert span["name"] == "upper"
    assert span["resource"]["attributes"]["service.name"] == "my-app"
    assert captured.out == ""
    assert telemetry.installed() is None


def test_the_otlp_exporter_is_set_up_without_connecting():
    tracing = telemetry.start_tracing(TracingSettings(traces_exporter="otlp"), service_name="t")

    assert tracing is telemetry.installed() is not None


def test_tracing_asked_for_without_the_extra_fails_at_start_saying_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)

    with pytest.raises(SettingsError, match=r"pip install 'asya\[otel\]'") as caught:
        telemetry.start_tracing(TracingSettings(traces_exporter="console"), service_name="t")

    assert caught.value.variable == "OTEL_TRACES_EXPORTER"
    assert telemetry.installed() is None
