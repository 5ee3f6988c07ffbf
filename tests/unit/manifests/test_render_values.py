"""`asya.manifests`: chart values from actor specs (only what differs from asya's defaults)."""

from __future__ import annotations

import pytest

from asya.actor import build_spec
from asya.manifests import RenderError, Rounded, merge_overlay, render_values
from asya.retry import RetryPolicy


def handler(payload):
    return payload


def spec(**options):
    return build_spec(handler, {"name": "work", **options})


def values_of(**options):
    values, rounded = render_values([spec(**options)], image="app:1")
    return values["actors"]["work"], rounded


def test_an_actor_with_asyas_defaults_is_its_handler_only():
    entry, rounded = values_of()

    assert entry == {"handler": f"{__name__}:handler"}
    assert rounded == []


def test_every_decorator_option_that_differs_from_the_default_is_written_as_the_crd_names_it():
    entry, _ = values_of(
        concurrency=8,
        timeout_s=12.5,
        batch=16,
        batch_wait_ms=40,
        min_replicas=1,
        max_replicas=6,
        queue_length=3,
        activation=2,
        cooldown_s=60,
        polling_interval_s=10,
        cpu="500m",
        memory="1Gi",
        gpus=2,
        pool="team-a",
        priority=5,
    )

    assert entry == {
        "handler": f"{__name__}:handler",
        "scaling": {
            "minReplicas": 1,
            "maxReplicas": 6,
            "queueLength": 3,
            "activationQueueLength": 2,
            "pollingInterval": 10,
            "cooldownPeriod": 60,
        },
        "resources": {"cpu": "500m", "memory": "1Gi", "gpus": 2},
        "concurrency": 8,
        "timeoutSeconds": 12.5,
        "batch": {"size": 16, "waitMs": 40},
        "pool": "team-a",
        "priority": 5,
    }


def test_a_changed_retry_policy_is_written_whole_since_the_crs_retry_replaces_it_whole():
    entry, _ = values_of(retry=RetryPolicy(max_attempts=5))

    assert entry["retry"] == {
        "maxAttempts": 5,
        "baseDelayMs": 1000,
        "factor": 2.0,
        "maxDelayMs": 60000,
        "jitter": 0.1,
        "retryTimeouts": True,
    }


def test_fractional_seconds_are_rounded_up_to_what_keda_counts_and_reported():
    entry, rounded = values_of(cooldown_s=0.5, polling_interval_s=0.2)

    assert entry["scaling"] == {"pollingInterval": 1, "cooldownPeriod": 1}
    assert rounded == [
        Rounded("work", "scaling.pollingInterval", 0.2, 1),
        Rounded("work", "scaling.cooldownPeriod", 0.5, 1),
    ]


def test_actors_are_written_in_name_order_with_the_image_and_namespace_first():
    second = build_spec(handler, {"name": "b-second"})
    first = build_spec(handler, {"name": "a-first"})

    values, _ = render_values([second, first], image="app:1", namespace="team-a")

    assert list(values) == ["image", "namespace", "actors"]
    assert list(values["actors"]) == ["a-first", "b-second"]


def test_an_empty_image_is_refused():
    with pytest.raises(RenderError, match="--image is empty"):
        render_values([spec()], image="  ")


def test_an_overlay_merges_mappings_replaces_the_rest_and_removes_on_null():
    values = {
        "image": "a",
        "actors": {"x": {"handler": "m:f", "env": [1]}, "y": {"handler": "m:g"}},
    }

    merged = merge_overlay(values, {"actors": {"x": {"env": [2], "flavor": "f"}, "y": None}})

    assert merged == {"image": "a", "actors": {"x": {"handler": "m:f", "env": [2], "flavor": "f"}}}
    assert values["actors"]["x"]["env"] == [1]  # the input is left as it was
