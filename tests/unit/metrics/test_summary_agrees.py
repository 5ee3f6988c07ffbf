"""`asya dev`'s summary table and the metrics a sidecar would serve tell the same story."""

from __future__ import annotations

import sys

import pytest

from asya import RetryPolicy, actor
from asya.hooks import StepResult
from asya.local.report import RunStats, format_summary
from asya.metrics import Metrics, histogram_quantile
from tests.unit.metrics.run import run_mesh, scrape, value


def _rows(table: str) -> dict[str, list[str]]:
    lines = table.splitlines()[2:]
    return {cells[0]: cells[1:] for cells in (line.split() for line in lines) if cells}


def _quantile_ms(samples, actor_name: str, fraction: float) -> str:
    buckets = sorted(
        (float(dict(labels)["le"]), v)
        for (name, labels), v in samples.items()
        if name == "asya_processing_seconds_bucket" and dict(labels)["actor"] == actor_name
    )
    return f"{histogram_quantile(fraction, buckets) * 1000:.1f}"


async def test_the_summary_table_shows_what_the_chain_metrics_count():
    @actor(max_replicas=2)
    def a(doc):
        return {"n": doc["n"] + 1}

    @actor(retry=RetryPolicy(max_attempts=2, base_delay_ms=1, jitter=0))
    def b(doc):
        if doc["n"] % 3 == 0:
            raise ValueError("a multiple of three")
        return doc

    metrics = Metrics()

    stats = await run_mesh([{"n": n} for n in range(8)], ["a", "b"], metrics=metrics)

    rows = _rows(format_summary(stats, ["a", "b"], 1.0))
    s = scrape(metrics)
    for name in ("a", "b"):
        envelopes, attempts, retried, failed, p50, p95, _ = rows[name]
        count = {
            outcome: sum(
                v
                for (metric, labels), v in s.items()
                if metric == "asya_envelopes_total"
                and dict(labels)["actor"] == name
                and dict(labels)["outcome"] == outcome
            )
            for outcome in ("succeeded", "retried", "failed")
        }
        assert int(envelopes) == count["succeeded"] + count["failed"]
        assert int(attempts) == sum(count.values())
        assert int(retried) == count["retried"]
        assert int(failed) == count["failed"]
        assert p50 == _quantile_ms(s, name, 0.50)
        assert p95 == _quantile_ms(s, name, 0.95)
    assert rows["a"][:4] == ["8", "8", "0", "0"]
    assert rows["b"][:4] == ["8", "10", "2", "2"]
    assert value(s, "asya_end_arrivals_total", actor="error-end", reason="HandlerError") == 2


async def test_without_prometheus_client_the_summary_counts_the_same(monkeypatch):
    steps = [
        ("a", StepResult.SUCCEEDED, 0.004),
        ("a", StepResult.RETRIED, 0.030),
        ("a", StepResult.FAILED, 0.2),
        ("b", StepResult.SUCCEEDED, 1.5),
    ]
    with_client = RunStats(_ignore)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed
    in_house = RunStats(_ignore)

    for stats in (with_client, in_house):
        for actor_name, result, duration_s in steps:
            stats.stepped(actor_name, result, "", duration_s, outputs=1)

    assert with_client.metrics.is_exposable
    assert not in_house.metrics.is_exposable
    assert in_house.metrics.exposition() == b""
    table = format_summary(in_house, ["a", "b"], 1.0)
    assert table == format_summary(with_client, ["a", "b"], 1.0)
    # a: 4, 30 and 200 ms; p50 is halfway through (25, 50] ms, p95 85% through (100, 250] ms
    assert _rows(table)["a"] == ["2", "3", "1", "1", "37.5", "227.5", "0"]


async def _ignore(envelope) -> None:
    return None


@pytest.mark.parametrize(
    ("fraction", "buckets", "expected"),
    [
        (0.5, [(0.1, 0.0), (0.2, 4.0), (float("inf"), 4.0)], 0.15),
        (0.95, [(0.1, 5.0), (0.2, 10.0), (float("inf"), 10.0)], 0.19),
        (0.5, [(0.1, 0.0), (0.2, 0.0), (float("inf"), 4.0)], 0.2),
        (0.5, [(0.1, 0.0), (float("inf"), 0.0)], 0.0),
        (0.5, [], 0.0),
    ],
    ids=["within-a-bucket", "upper-bucket", "past-the-last-bound", "nothing-observed", "empty"],
)
def test_a_quantile_is_read_from_buckets_as_prometheus_does(fraction, buckets, expected):
    assert histogram_quantile(fraction, buckets) == pytest.approx(expected)
