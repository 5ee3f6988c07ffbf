"""The admission CRDs' defaults are the engine's and asya's: a field left out of a
ResourcePool or ActorGroup means what it means in a scenario file or an `@actor`."""

from __future__ import annotations

import msgspec
import pytest
from asya_operator.api.crds import actor_group_crd, resource_pool_crd
from asya_operator.api.group import ActorGroup, ActorGroupSpec, desired_instances
from asya_operator.api.pool import ResourcePoolSpec
from asya_operator.api.template import DNS_SUBDOMAIN_PATTERN, QUANTITY_PATTERN

from asya.actor import ActorOptions
from asya.admission.model import Pool
from asya.admission.quantity import NON_NEGATIVE_QUANTITY_PATTERN
from asya.admission.quotas import FLAVOR_NAME_PATTERN, Preemption
from asya.admission.readiness import ReadinessPolicy
from tests.operator.cr_validation import apply_defaults, openapi_schema

MEMBERS = [{"name": "w", "replicas": 1, "template": {"image": "img", "handler": "m:f"}}]


def spec_schema(crd):
    return openapi_schema(crd)["properties"]["spec"]


def engine_default(name):
    return next(f.default for f in msgspec.structs.fields(Pool) if f.name == name)


def test_a_pool_left_at_its_defaults_queues_and_preempts_as_a_scenario_pool_does():
    defaulted = apply_defaults({}, spec_schema(resource_pool_crd()))
    decoded = msgspec.convert({}, ResourcePoolSpec)

    preemption = Preemption()
    expected = {
        "queueingStrategy": engine_default("queueing_strategy").value,
        "preemption": {
            "withinPool": preemption.within_pool.value,
            "reclaimWithinCohort": preemption.reclaim_within_cohort.value,
            "borrowWithinCohort": {"policy": preemption.borrow_within_cohort.policy.value},
        },
    }
    assert defaulted == expected
    assert decoded.queueing_strategy == engine_default("queueing_strategy")
    assert (decoded.preemption.within_pool, decoded.preemption.reclaim_within_cohort) == (
        preemption.within_pool,
        preemption.reclaim_within_cohort,
    )
    assert decoded.preemption.borrow_within_cohort.policy == preemption.borrow_within_cohort.policy


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("priority", ActorOptions().priority),
        ("readinessTimeoutSeconds", int(ReadinessPolicy().timeout_s)),
        (
            "requeuing",
            {
                "backoffBaseSeconds": int(ReadinessPolicy().backoff_base_s),
                "backoffMaxSeconds": int(ReadinessPolicy().backoff_max_s),
            },
        ),
        ("keepQueues", False),
    ],
)
def test_a_group_field_left_out_gets_asyas_default_in_the_crd_and_the_model(field, expected):
    defaulted = apply_defaults({"members": MEMBERS}, spec_schema(actor_group_crd()))
    decoded = msgspec.to_builtins(msgspec.convert({"members": MEMBERS}, ActorGroupSpec))
    value = decoded[field]
    if isinstance(value, dict):  # an unset optional field is no key in the CR
        value = {k: v for k, v in value.items() if v is not None}

    assert defaulted[field] == expected
    assert value == expected


def test_a_groups_pool_and_scaling_are_unset_unless_given_so_it_is_neither_gated_nor_scaled():
    defaulted = apply_defaults({"members": MEMBERS}, spec_schema(actor_group_crd()))

    assert "pool" not in defaulted
    assert "scaling" not in defaulted
    assert "replicas" not in defaulted  # unset: scaling.minReplicas, or one instance


@pytest.mark.parametrize(
    ("replicas", "scaling", "expected"),
    [
        (None, None, 1),
        (3, None, 3),
        (None, {"minReplicas": 2, "maxReplicas": 5}, 2),
        (9, {"minReplicas": 0, "maxReplicas": 5}, 5),
        (0, {"minReplicas": 1, "maxReplicas": 5}, 1),
    ],
    ids=[
        "one by default",
        "as written",
        "a scaled group starts at its minimum",
        "capped",
        "floored",
    ],
)
def test_a_groups_desired_instances_are_its_replicas_within_its_scaling_bounds(
    replicas, scaling, expected
):
    spec: dict = {"members": MEMBERS}
    if replicas is not None:
        spec["replicas"] = replicas
    if scaling is not None:
        spec["scaling"] = scaling
    group = msgspec.convert({"metadata": {"name": "g"}, "spec": spec}, ActorGroup)

    assert desired_instances(group) == expected
    assert "unset = no quota" in spec_schema(actor_group_crd())["properties"]["pool"]["description"]


def test_the_engines_quota_and_flavor_patterns_are_the_apis():
    # The engine cannot import the operator, so it spells the patterns its quota types carry
    # into the CRDs; they must stay the core API's (a quantity, here without a minus sign).
    assert QUANTITY_PATTERN.replace(r"^(\+|-)?", r"^\+?", 1) == NON_NEGATIVE_QUANTITY_PATTERN
    assert FLAVOR_NAME_PATTERN == DNS_SUBDOMAIN_PATTERN
