"""The charts' values.schema.json files are the generated ones
(`asya_operator.api.chart_schema`)."""

from __future__ import annotations

from asya_operator.api.chart_schema import REGENERATE, actor_entry_schema, schema_files

from tests.charts.chart_checks import CHARTS


def test_the_committed_schemas_are_the_generated_ones():
    for name, text in schema_files().items():
        committed = (CHARTS / name).read_text(encoding="utf-8")

        assert committed == text, f"{name} is stale: run {REGENERATE}"


def test_an_actor_entry_is_the_async_actor_spec_less_the_replicas_keda_owns():
    entry = actor_entry_schema(handler_required=True)

    assert "replicas" not in entry["properties"]
    assert {"handler", "image", "scaling", "resources", "retry", "batch"} <= set(
        entry["properties"]
    )
    assert entry["required"] == ["handler"]
    assert entry["additionalProperties"] is False
    assert entry["properties"]["scaling"]["additionalProperties"] is False
    # Free-form in the CRD, free-form here (a valueFrom, an envFrom source).
    assert "additionalProperties" not in entry["properties"]["envFrom"]["items"]
