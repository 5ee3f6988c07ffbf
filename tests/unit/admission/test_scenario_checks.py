"""A scenario reaches the engine two ways, a file (`load_scenario`) or typed parts
(`build_scenario`), and both are checked alike: the same scenario either way, the same
refusals with what to fix."""

from __future__ import annotations

import pytest

from asya.admission.model import (
    PodSet,
    PodSetAssignment,
    Pool,
    Workload,
    build_scenario,
    load_scenario,
)
from asya.admission.quantity import Milli
from asya.admission.quotas import FlavorQuotas, ResourceQuota
from asya.admission.scheduler import simulate
from asya.errors import AdmissionError
from tests.factories import pool, workload


def typed_pool(*quotas: ResourceQuota, name: str = "p") -> Pool:
    return Pool(name=name, quotas=(FlavorQuotas(flavor="cpu", resources=quotas),))


def test_a_file_and_typed_parts_make_the_same_scenario():
    raw = {
        "pools": [pool("p", cpu={"cpu": {"nominal": "8", "lendingLimit": 2}})],
        "workloads": [workload("w", "p", cpu="500m", admitted="cpu")],
    }

    typed = build_scenario(
        pools=[typed_pool(ResourceQuota(name="cpu", nominal="8", lending_limit=2))],
        workloads=[
            Workload(
                name="w",
                pool="p",
                pod_sets=(PodSet(name="main", count=1, requests={"cpu": Milli(500)}),),
                admitted=(PodSetAssignment(pod_set="main", flavor="cpu", count=1),),
            )
        ],
    )

    assert typed == load_scenario(raw)


@pytest.mark.parametrize(
    ("quotas", "expected"),
    [
        (
            [ResourceQuota(name="cpu", nominal="lots")],
            "pool 'p' flavor 'cpu' resource 'cpu': expected a quantity such as 2",
        ),
        (
            [ResourceQuota(name="cpu", nominal=4, borrowing_limit=-1)],
            "pool 'p' flavor 'cpu' resource 'cpu': a quantity must be a finite number >= 0",
        ),
        (
            [ResourceQuota(name="cpu", nominal=4), ResourceQuota(name="cpu", nominal=2)],
            "pool 'p' flavor 'cpu' resource 'cpu' is given twice",
        ),
    ],
    ids=["not-a-quantity", "negative", "twice"],
)
def test_typed_quotas_are_refused_as_a_files_would_be_naming_where(quotas, expected):
    with pytest.raises(AdmissionError, match=expected):
        build_scenario(pools=[typed_pool(*quotas)])


def test_typed_parts_are_refused_for_what_a_file_is_refused_for():
    wl = Workload(name="w", pool="p", pod_sets=(PodSet(name="main", count=1, flavors=()),))

    with pytest.raises(AdmissionError, match="pod set 'main': flavors is empty"):
        build_scenario(pools=[typed_pool()], workloads=[wl])


def test_a_files_quota_with_a_fraction_is_the_quantity_it_is():
    raw = {
        "pools": [pool("p", cpu={"cpu": 0.5})],
        "workloads": [workload("w", "p", cpu="500m"), workload("x", "p", created=1, cpu="1m")],
    }

    scenario = load_scenario(raw)

    assert scenario.pools[0].quotas[0].quota("cpu") == ResourceQuota(name="cpu", nominal="500m")
    done = simulate(scenario)
    assert [a.workload for a in done.admitted] == ["w"]


def test_a_file_giving_a_flavors_resources_as_a_list_is_told_to_give_a_map():
    raw = {"pools": [{"name": "p", "quotas": [{"flavor": "f", "resources": [{"name": "cpu"}]}]}]}

    with pytest.raises(AdmissionError, match="pool 'p' flavor 'f': give resources as a map"):
        load_scenario(raw)
