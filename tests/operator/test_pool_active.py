"""A ResourcePool's Active condition: True when its quotas are valid, every flavor they name
exists and the cohorts can be read; False with the reason, every problem named."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest
from asya_operator.api.pool import ResourcePool
from asya_operator.plans.pool_status import find_pool_problems, plan_pool_status

from tests.operator.test_admission_pass import cohort, pool

NOW = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
USAGE = {"flavorsUsage": [], "admittedWorkloads": 0, "pendingWorkloads": 0}


def twice_named() -> ResourcePool:
    gpu = {"name": "nvidia.com/gpu", "nominal": 2}
    body = {
        "metadata": {"name": "team-a"},
        "spec": {"quotas": [{"flavor": "h100", "resources": [gpu, gpu]}]},
    }
    return msgspec.convert(body, ResourcePool)


def active(pool_, flavors, cohorts=()):
    problems = find_pool_problems(pool_, flavors, list(cohorts))
    (condition,) = plan_pool_status(pool_, USAGE, problems, now=NOW).document()["conditions"]
    return condition["status"], condition["reason"], condition["message"]


@pytest.mark.parametrize(
    ("pool_", "flavors", "cohorts", "expected"),
    [
        (
            pool("team-a", cohort="eng", h100={"nvidia_com_gpu": 2}),
            {"h100"},
            [],
            ("True", "Ready", "quotas valid, every flavor found: admits workloads"),
        ),
        (
            pool("team-a", h100={"nvidia_com_gpu": 2}, a100={"nvidia_com_gpu": 1}),
            {"h100"},
            [],
            (
                "False",
                "FlavorNotFound",
                "ResourceFlavor a100 not found: create it or remove it from spec.quotas",
            ),
        ),
        (
            twice_named(),
            {"h100"},
            [],
            (
                "False",
                "InvalidQuota",
                "spec.quotas: pool 'team-a' flavor 'h100' resource 'nvidia.com/gpu' is given"
                " twice: give each resource once: fix the pool's quotas",
            ),
        ),
        (
            pool("team-a", cohort="eng", h100={"nvidia_com_gpu": 2}),
            {"h100"},
            [cohort("eng", parent="org"), cohort("org", parent="eng")],
            (
                "False",
                "InvalidCohort",
                "the Cohorts cannot be read (cohorts form a loop: eng -> org -> eng): no"
                " workload is admitted until they are fixed",
            ),
        ),
    ],
    ids=["active", "flavor-missing", "quota-invalid", "cohort-loop"],
)
def test_active_says_whether_the_pool_can_admit_and_else_why_not(pool_, flavors, cohorts, expected):
    assert active(pool_, flavors, cohorts) == expected


def test_every_missing_flavor_is_named_the_first_gives_the_reason():
    pool_ = pool("team-a", h100={"nvidia_com_gpu": 2}, a100={"nvidia_com_gpu": 1})

    status, reason, message = active(pool_, set())

    assert (status, reason) == ("False", "FlavorNotFound")
    assert message == (
        "ResourceFlavor h100 not found: create it or remove it from spec.quotas;"
        " ResourceFlavor a100 not found: create it or remove it from spec.quotas"
    )


def test_the_status_carries_the_usage_the_generation_and_the_time_active_last_changed():
    body = msgspec.to_builtins(pool("team-a", h100={"nvidia_com_gpu": 2}))
    body["metadata"]["generation"] = 3
    before = "2026-11-25T08:00:00Z"
    body["status"] = {
        "conditions": [{"type": "Active", "status": "True", "lastTransitionTime": before}]
    }
    stored = msgspec.convert(body, ResourcePool)

    patch = plan_pool_status(stored, USAGE, [], now=NOW)

    document = patch.document()
    assert document["observedGeneration"] == 3
    assert (document["admittedWorkloads"], document["pendingWorkloads"]) == (0, 0)
    (condition,) = document["conditions"]
    assert (condition["observedGeneration"], condition["lastTransitionTime"]) == (3, before)
    assert patch.changed(stored.status)  # usage and generation are news to the stored status
