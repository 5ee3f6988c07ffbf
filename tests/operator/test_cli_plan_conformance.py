"""Offline = cluster: `asya-operator plan`'s reading of a CR (`plans.files.read_crs`) refuses
exactly the CRs the API server refuses under the generated CRDs on `kubectl apply` (as
`cr_validation` does it: defaults, the openAPIV3Schema, the CEL rules, and strict field
validation's unknown fields), for every example of the CEL-rule and schema tables, broken and
kept, and with the same rule's message."""

from __future__ import annotations

import re
from typing import Any

import pytest
from asya_operator.api.crds import all_crds
from asya_operator.plans.files import CrError, Document, read_crs

from tests.operator import test_admission_cel_rules as admission_rules
from tests.operator import test_cel_rules as rules
from tests.operator.admission_crs import COHORT, GROUP, POOL, changed
from tests.operator.cr_validation import openapi_schema, rejections, unknown_fields

CRDS = {crd["spec"]["names"]["kind"]: crd for crd in all_crds()}


def _rows(table: list[tuple[Any, ...]]) -> list[tuple[str, dict[str, Any]]]:
    return [(row[0], row[1]) for row in table]


BROKEN_BY_CEL = _rows(rules.BROKEN_BY_CEL) + _rows(admission_rules.BROKEN_BY_CEL)
BROKEN_BY_SCHEMA = _rows(rules.BROKEN_BY_SCHEMA) + _rows(admission_rules.BROKEN_BY_SCHEMA)
UNKNOWN_FIELDS = [
    ("a misspelt spec field", changed(rules.ACTOR, spec__scalling={"maxReplicas": 4})),
    ("a misspelt scaling field", changed(rules.ACTOR, spec__scaling={"maxReplica": 4})),
    ("a field in a list item", changed(rules.ACTOR, spec__env=[{"name": "A", "vaule": "1"}])),
    ("a misspelt pool field", changed(POOL, spec__cohrt="eng")),
    ("a misspelt member field", changed(GROUP, spec__members__0__replica=2)),
]
KEPT = [
    ("an actor as written", rules.ACTOR),
    ("a flavor as written", rules.FLAVOR),
    ("a pool as written", POOL),
    ("a cohort as written", COHORT),
    *admission_rules.KEPT,
    (
        "an actor with fields in a free-form object",
        changed(rules.ACTOR, spec__envFrom=[{"configMapRef": {"name": "c"}, "any": 1}]),
    ),
]
EVERY = BROKEN_BY_CEL + BROKEN_BY_SCHEMA + UNKNOWN_FIELDS + KEPT


def cluster_rejections(cr: dict[str, Any]) -> list[str]:
    """Why the API server would refuse `cr` from `kubectl apply` (strict field validation)."""
    crd = CRDS[cr["kind"]]
    return unknown_fields(cr, openapi_schema(crd)) + rejections(cr, crd)


def offline_rejection(cr: dict[str, Any]) -> str | None:
    """Why `asya-operator plan` refuses `cr` (None: it takes it)."""
    try:
        read_crs([Document("crs.yaml: document 1", cr)], "default")
    except CrError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("cr", [row[1] for row in EVERY], ids=[row[0] for row in EVERY])
def test_plan_refuses_a_cr_exactly_when_the_api_server_would(cr):
    assert (offline_rejection(cr) is None) == (cluster_rejections(cr) == [])


@pytest.mark.parametrize(
    "cr", [row[1] for row in BROKEN_BY_CEL], ids=[row[0] for row in BROKEN_BY_CEL]
)
def test_plan_refuses_a_cr_breaking_a_cel_rule_naming_what_the_api_server_names(cr):
    offline = offline_rejection(cr)

    assert offline is not None
    for rejection in rejections(cr, CRDS[cr["kind"]]):
        path = rejection.split(": ", 1)[0]
        # The rule's own message; or, where the model types the field with the rule's bound
        # (a quota's integer that the CRD's int-or-string leaves to a CEL rule), the typed
        # decode's message naming the field under the rule's path.
        assert rejection in offline or f"`$.{path}." in offline, (rejection, offline)


def _msgspec_path(jsonschema_path: str) -> str:
    # jsonschema's `spec.quotas.0.nominal` is msgspec's `$.spec.quotas[0].nominal`.
    return "$." + re.sub(r"\.(\d+)", r"[\1]", jsonschema_path)


@pytest.mark.parametrize(
    "cr", [row[1] for row in BROKEN_BY_SCHEMA], ids=[row[0] for row in BROKEN_BY_SCHEMA]
)
def test_plan_refuses_a_cr_breaking_the_schema_naming_the_field_the_api_server_names(cr):
    offline = offline_rejection(cr)

    assert offline is not None
    fields = {
        _msgspec_path(rejection.split(": ", 1)[0]) for rejection in rejections(cr, CRDS[cr["kind"]])
    }
    assert any(f"`{field}" in offline for field in fields), (fields, offline)


@pytest.mark.parametrize(
    "cr", [row[1] for row in UNKNOWN_FIELDS], ids=[row[0] for row in UNKNOWN_FIELDS]
)
def test_plan_names_each_unknown_field_the_api_server_would(cr):
    offline = offline_rejection(cr)

    assert offline is not None
    for field in unknown_fields(cr, openapi_schema(CRDS[cr["kind"]])):
        assert field in offline
