"""`asya_inflight` and `asya_publish_pending` read the actor's level whenever scraped, on both
backends (prometheus-client's exposition, and the in-house instruments without it)."""

from __future__ import annotations

import sys

import pytest

from asya.metrics import Metrics


def levels(metrics: Metrics, actor: str) -> tuple[float, float]:
    by_name = {s.name: s.value for s in metrics.samples() if s.labels.get("actor") == actor}
    return by_name.get("asya_inflight", 0.0), by_name.get("asya_publish_pending", 0.0)


@pytest.mark.parametrize("backend", ["prometheus-client", "in-house"])
def test_each_scrape_reads_the_levels_as_they_are_then(backend, monkeypatch):
    if backend == "in-house":
        monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed
    metrics = Metrics()

    metrics.taken("a", 3, redelivered=0)
    metrics.confirms_pending("a", 1)
    metrics.confirms_pending("a", 1)
    metrics.taken("b", 1, redelivered=0)
    first = levels(metrics, "a"), levels(metrics, "b")
    metrics.released("a", 2)
    metrics.confirms_pending("a", -1)
    second = levels(metrics, "a"), levels(metrics, "b")

    assert first == ((3, 2), (1, 0))
    assert second == ((1, 1), (1, 0))
    assert metrics.is_exposable is (backend == "prometheus-client")
    if metrics.is_exposable:
        text = metrics.exposition().decode()
        assert 'asya_inflight{actor="a"} 1.0' in text
        assert 'asya_publish_pending{actor="a"} 1.0' in text
