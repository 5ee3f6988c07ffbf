"""The CRDs' defaults are asya's defaults: the numbers an `@actor` without options gets."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from asya_operator.api.actor import AsyncActorSpec
from asya_operator.api.crds import async_actor_crd

from asya.actor import ActorOptions
from asya.retry import RetryPolicy
from tests.operator.cr_validation import apply_defaults, openapi_schema

# (path under spec, the class whose default it is, that class's field)
DEFAULTED = [
    ("scaling.minReplicas", ActorOptions, "min_replicas"),
    ("scaling.maxReplicas", ActorOptions, "max_replicas"),
    ("scaling.queueLength", ActorOptions, "queue_length"),
    ("scaling.activationQueueLength", ActorOptions, "activation"),
    ("scaling.pollingInterval", ActorOptions, "polling_interval_s"),
    ("scaling.cooldownPeriod", ActorOptions, "cooldown_s"),
    ("resources.gpus", ActorOptions, "gpus"),
    ("retry.maxAttempts", RetryPolicy, "max_attempts"),
    ("retry.baseDelayMs", RetryPolicy, "base_delay_ms"),
    ("retry.factor", RetryPolicy, "factor"),
    ("retry.maxDelayMs", RetryPolicy, "max_delay_ms"),
    ("retry.jitter", RetryPolicy, "jitter"),
    ("retry.retryTimeouts", RetryPolicy, "retry_timeouts"),
    ("priority", ActorOptions, "priority"),
]

# Unset in the CR means "the decorator's value", so the CRD gives these no default.
DECORATOR_DECIDES = ["retry", "timeoutSeconds", "concurrency", "batch"]


def test_a_batch_override_without_a_wait_keeps_the_decorators_wait():
    batch = schema_at(openapi_schema(async_actor_crd()), "spec.batch")

    assert "default" not in batch["properties"]["waitMs"]
    assert "unset = the decorator's" in batch["properties"]["waitMs"]["description"]


MINIMAL = {"image": "img", "handler": "m:f", "retry": {}, "batch": {"size": 1}}


def at(obj: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        obj = obj[part]
    return obj


def schema_at(schema: dict[str, Any], dotted: str) -> dict[str, Any]:
    for part in dotted.split("."):
        schema = schema["properties"][part]
    return schema


@pytest.mark.parametrize(("path", "cls", "name"), DEFAULTED, ids=[row[0] for row in DEFAULTED])
def test_a_field_left_out_gets_asyas_default_in_the_crd_and_the_model(path, cls, name):
    expected = getattr(cls(), name)
    spec_schema = schema_at(openapi_schema(async_actor_crd()), "spec")
    assert schema_at(spec_schema, path)["default"] == expected
    assert at(apply_defaults(MINIMAL, spec_schema), path) == expected
    model = msgspec.to_builtins(msgspec.convert(MINIMAL, AsyncActorSpec))
    assert at(model, path) == expected


@pytest.mark.parametrize("name", DECORATOR_DECIDES)
def test_an_execution_override_has_no_default_so_the_decorator_keeps_its_value(name):
    spec_schema = schema_at(openapi_schema(async_actor_crd()), "spec")
    assert "default" not in spec_schema["properties"][name]
    assert "applies it over the decorator" in spec_schema["properties"][name]["description"]
    defaulted = apply_defaults({"image": "img", "handler": "m:f"}, spec_schema)
    assert name not in defaulted
