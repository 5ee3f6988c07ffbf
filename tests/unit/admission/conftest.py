"""Run a scenario built from tests.factories and read the result by workload name."""

from __future__ import annotations

import pytest

from asya.admission.model import load_scenario
from asya.admission.scheduler import result_as_dict, simulate


class Outcome:
    def __init__(self, raw: dict) -> None:
        self.raw = raw
        self.admitted = {a["workload"]: a for a in raw["admitted"]}
        self.pending = {p["workload"]: p for p in raw["pending"]}
        self.preempted = [(p["workload"], p["preemptor"], p["reason"]) for p in raw["preempted"]]

    def counts(self, name: str) -> dict[str, int]:
        return {ps["name"]: ps["count"] for ps in self.admitted[name]["podSets"]}

    def flavor(self, name: str) -> str:
        [flavor] = {ps["flavor"] for ps in self.admitted[name]["podSets"]}
        return flavor


@pytest.fixture
def run():
    def run_scenario(pools, workloads, cohorts=(), cycles=None) -> Outcome:
        scenario = load_scenario({"cohorts": list(cohorts), "pools": pools, "workloads": workloads})
        return Outcome(result_as_dict(simulate(scenario, max_cycles=cycles)))

    return run_scenario
