"""The operator's pool gauges follow what the last admission pass planned."""

from __future__ import annotations

from asya_operator import metrics
from prometheus_client.parser import text_string_to_metric_families


def series(name: str, *labels: str) -> dict[tuple[str, ...], float]:
    text = metrics.exposition().decode()
    return {
        tuple(sample.labels[label] for label in labels): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


STATUS = {
    "flavorsUsage": [
        {
            "flavor": "h100",
            "resources": [
                {"name": "nvidia.com/gpu", "usage": "3", "borrowed": "1", "lent": "0"},
                {"name": "cpu", "usage": "1500m", "borrowed": "0", "lent": "500m"},
            ],
        }
    ],
    "admittedWorkloads": 3,
    "pendingWorkloads": 2,
}


def test_pool_usage_borrowed_lent_and_replicas_are_set_in_units_and_cleared_when_gone():
    metrics.record_pools({"team-a": STATUS})

    assert series("asya_operator_pool_usage", "pool", "flavor", "resource") == {
        ("team-a", "h100", "nvidia.com/gpu"): 3.0,
        ("team-a", "h100", "cpu"): 1.5,
    }
    assert (
        series("asya_operator_pool_borrowed", "pool", "flavor", "resource")[
            ("team-a", "h100", "nvidia.com/gpu")
        ]
        == 1.0
    )
    assert (
        series("asya_operator_pool_lent", "pool", "flavor", "resource")[("team-a", "h100", "cpu")]
        == 0.5
    )
    assert series("asya_operator_pool_replicas", "pool", "state") == {
        ("team-a", "admitted"): 3.0,
        ("team-a", "pending"): 2.0,
    }

    metrics.record_pools({})

    assert series("asya_operator_pool_usage", "pool", "flavor", "resource") == {}


def test_pending_since_lists_exactly_the_actors_waiting_now():
    metrics.record_pending({("ml", "embed"): 1_700_000_000.0, ("ml", "rank"): 1_700_000_100.0})
    metrics.record_pending({("ml", "rank"): 1_700_000_100.0})

    assert series("asya_operator_pending_since_seconds", "namespace", "actor") == {
        ("ml", "rank"): 1_700_000_100.0
    }
