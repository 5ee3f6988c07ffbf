"""The example CRs in examples/operator/ are accepted by our CRDs, CEL rules included."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import yaml
from asya_operator.api.actor import AsyncActor
from asya_operator.api.crds import all_crds
from asya_operator.api.flavor import ResourceFlavor

from asya.handler import load_handler
from tests.operator.cr_validation import openapi_schema, rejections, unknown_fields

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "operator" / "quickstart.yaml"
CRDS = {crd["spec"]["names"]["kind"]: crd for crd in all_crds()}
MODELS = {"AsyncActor": AsyncActor, "ResourceFlavor": ResourceFlavor}
DOCUMENTS = list(yaml.safe_load_all(EXAMPLE.read_text(encoding="utf-8")))
IDS = [f"{doc['kind']}/{doc['metadata']['name']}" for doc in DOCUMENTS]


@pytest.mark.parametrize("doc", DOCUMENTS, ids=IDS)
def test_each_example_cr_passes_the_schema_and_every_cel_rule(doc):
    assert rejections(doc, CRDS[doc["kind"]]) == []


@pytest.mark.parametrize("doc", DOCUMENTS, ids=IDS)
def test_each_example_cr_has_only_fields_the_crd_knows(doc):
    assert unknown_fields(doc, openapi_schema(CRDS[doc["kind"]])) == []


@pytest.mark.parametrize("doc", DOCUMENTS, ids=IDS)
def test_each_example_cr_decodes_into_the_typed_model(doc):
    decoded = msgspec.convert(doc, MODELS[doc["kind"]])
    assert decoded.metadata["name"] == doc["metadata"]["name"]


def test_the_examples_are_the_quickstarts_actors_each_named_as_its_decorator_names_it():
    actors = [doc for doc in DOCUMENTS if doc["kind"] == "AsyncActor"]
    names = {doc["metadata"]["name"] for doc in actors}
    assert names == {"normalize", "split", "detect-language", "score", "review"}
    for doc in actors:
        assert load_handler(doc["spec"]["handler"]).name == doc["metadata"]["name"]


def test_every_flavor_an_example_actor_names_is_in_the_examples():
    flavors = {doc["metadata"]["name"] for doc in DOCUMENTS if doc["kind"] == "ResourceFlavor"}
    for doc in DOCUMENTS:
        if doc["kind"] == "AsyncActor" and "flavor" in doc["spec"]:
            assert doc["spec"]["flavor"] in flavors
