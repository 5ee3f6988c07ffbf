"""The admission example CRs are accepted by our CRDs and decode into the typed model; the
two-team example decides what its comments say."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import yaml
from asya_operator.api.actor import AsyncActor
from asya_operator.api.crds import all_crds
from asya_operator.api.flavor import ResourceFlavor
from asya_operator.api.group import ActorGroup
from asya_operator.api.pool import Cohort, ResourcePool
from asya_operator.plans.files import Document, read_crs
from asya_operator.plans.whatif import decisions, snapshot_of

from asya.admission.scheduler import simulate
from tests.operator.cr_validation import openapi_schema, rejections, unknown_fields

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "operator"
FILES = [EXAMPLES / "gpu-teams.yaml", *sorted((EXAMPLES / "admission").glob("*.yaml"))]
CRDS = {crd["spec"]["names"]["kind"]: crd for crd in all_crds()}
MODELS = {
    "AsyncActor": AsyncActor,
    "ResourceFlavor": ResourceFlavor,
    "ResourcePool": ResourcePool,
    "Cohort": Cohort,
    "ActorGroup": ActorGroup,
}
DOCUMENTS = [
    (path, doc)
    for path in FILES
    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
    if doc["apiVersion"].startswith("asya.sh/")
]
IDS = [f"{path.name}:{doc['kind']}/{doc['metadata']['name']}" for path, doc in DOCUMENTS]


@pytest.mark.parametrize(("path", "doc"), DOCUMENTS, ids=IDS)
def test_each_example_cr_passes_the_schema_and_every_cel_rule(path, doc):
    assert rejections(doc, CRDS[doc["kind"]]) == []


@pytest.mark.parametrize(("path", "doc"), DOCUMENTS, ids=IDS)
def test_each_example_cr_has_only_fields_the_crd_knows(path, doc):
    assert unknown_fields(doc, openapi_schema(CRDS[doc["kind"]])) == []


@pytest.mark.parametrize(("path", "doc"), DOCUMENTS, ids=IDS)
def test_each_example_cr_decodes_into_the_typed_model(path, doc):
    decoded = msgspec.convert(doc, MODELS[doc["kind"]])

    assert decoded.metadata["name"] == doc["metadata"]["name"]


def test_the_two_teams_share_the_cohort_as_the_example_says():
    path = EXAMPLES / "gpu-teams.yaml"
    bodies = yaml.safe_load_all(path.read_text(encoding="utf-8"))
    snapshot = snapshot_of(read_crs([Document(str(path), body) for body in bodies], "default"))

    decided = decisions(snapshot, simulate(snapshot.scenario))

    admitted = {a["workload"]: (a["borrowing"], a["podSets"]) for a in decided["admitted"]}
    assert admitted == {
        "ml-a/embed": (False, [{"name": "replica", "flavor": "h100", "count": 6}]),
        "ml-b/ddp-train[0]": (
            True,
            [
                {"name": "trainer", "flavor": "h100", "count": 4},
                {"name": "coordinator", "flavor": "h100", "count": 1},
            ],
        ),
        "ml-b/eval[0]": (True, [{"name": "worker", "flavor": "h100", "count": 2}]),
    }
    (pending,) = decided["pending"]
    assert pending["workload"] == "ml-b/eval[1]"
    assert "may borrow 7 more from cohort eng (1 more needed)" in pending["message"]
