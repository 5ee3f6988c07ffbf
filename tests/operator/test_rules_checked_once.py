"""The CRDs' CEL rules are evaluated once per object content, not at every read.

A reconcile reads every actor of its namespace (`Kube.world`), so evaluating each one's rules
at every read made a burst of N actors cost N² evaluations, milliseconds each. The rules read
an object's name and spec only: the result is remembered under a digest of those two.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest
from asya_operator.api import decoding
from asya_operator.api.actor import AsyncActor
from asya_operator.api.decoding import RULES_READ, StoredSpecError, decode
from asya_operator.api.flavor import ResourceFlavor
from asya_operator.api.group import ActorGroup
from asya_operator.api.pool import Cohort, ResourcePool

from tests.operator.controller_world import async_actor

ROOTS = (AsyncActor, ActorGroup, ResourcePool, Cohort, ResourceFlavor)


def _rules(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, str]]:
    for rule in schema.get("x-kubernetes-validations", ()):
        yield path, rule["rule"]
    for name, sub in schema.get("properties", {}).items():
        yield from _rules(sub, f"{path}.{name}".lstrip("."))
    if isinstance(schema.get("items"), dict):
        yield from _rules(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _rules(schema["additionalProperties"], f"{path}{{}}")


@pytest.mark.parametrize("root", ROOTS, ids=lambda root: root.__name__)
def test_the_crds_rules_read_only_what_they_are_remembered_by(root):
    # Given every CEL rule of the CRD, with the path it is evaluated at
    rules = list(_rules(decoding._schema_of(root)))

    # Then each lives under the spec, or at the root reading only the name and the spec
    for path, rule in rules:
        if path:
            assert path == "spec" or path.startswith(("spec.", "spec[")), (path, rule)
        else:
            read = {m.group(0) for m in re.finditer(r"self(\.\w+)+", rule)}
            assert all(r.startswith(("self.metadata.name", "self.spec")) for r in read), rule
    assert RULES_READ == ("metadata.name", "spec")


@pytest.fixture
def evaluations(monkeypatch):
    """The bodies the rules are evaluated on, from a cache emptied for the test."""
    monkeypatch.setattr(decoding, "_checked", type(decoding._checked)())
    seen = []
    evaluate = decoding.cel_violations  # type: ignore[attr-defined]

    def counted(obj, schema, path=""):
        seen.append(obj)
        return evaluate(obj, schema, path)

    monkeypatch.setattr(decoding, "cel_violations", counted)
    return seen


def _stored(name: str = "text", **spec: Any) -> dict[str, Any]:
    body = async_actor(name, **spec)
    body["metadata"].update(namespace="team-a", uid="u-1", resourceVersion="7", generation=1)
    return body


def test_an_actor_read_again_with_only_its_status_changed_is_not_evaluated_again(evaluations):
    # Given an actor decoded once
    body = _stored()
    decode(body, AsyncActor)

    # When it is read again and again, its status and resourceVersion moving on
    for version in range(8, 20):
        again = copy.deepcopy(body)
        again["metadata"]["resourceVersion"] = str(version)
        again["metadata"]["labels"] = {"seen": str(version)}
        again["status"] = {"replicas": version, "conditions": []}
        assert decode(again, AsyncActor).metadata["resourceVersion"] == str(version)

    # Then its rules were evaluated once, on its name and spec alone
    assert len(evaluations) == 1
    assert set(evaluations[0]) == {"metadata", "spec"}
    assert evaluations[0]["metadata"] == {"name": "text"}


def test_a_changed_spec_or_name_is_evaluated_again(evaluations):
    decode(_stored(), AsyncActor)
    decode(_stored(timeout=30), AsyncActor)
    decode(_stored("other"), AsyncActor)
    decode(_stored(timeout=30), AsyncActor)

    assert len(evaluations) == 3


def test_an_object_that_breaks_a_rule_is_refused_at_every_read(evaluations):
    # Given an actor whose name breaks its CRD's rule (too long for an actor's name)
    body = _stored("a" * 60)

    # Then it is refused each time it is read, its rules evaluated once
    for _ in range(3):
        with pytest.raises(StoredSpecError, match="at most 53 characters"):
            decode(body, AsyncActor)
    assert len(evaluations) == 1


def test_what_is_remembered_is_bounded(evaluations, monkeypatch):
    # Given room for three objects' results
    monkeypatch.setattr(decoding, "RULES_CHECKED_KEPT", 3)

    # When four actors are read, then the first again
    for name in ("a", "b", "c", "d", "a"):
        decode(_stored(name), AsyncActor)

    # Then three are kept, and the first, pushed out by the fourth, was evaluated again
    assert len(decoding._checked) == 3
    assert [e["metadata"]["name"] for e in evaluations] == ["a", "b", "c", "d", "a"]
