"""The CRDs: committed as generated, accepted by the API server's own schema, structural."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from asya_operator.api.crds import (
    DEFAULT_OUT,
    PACKAGED_SCHEMA,
    REGENERATE,
    all_crds,
    crd_files,
    packaged_schema,
)

from asya.crd_rules import compile_rule
from tests.operator.cr_validation import (
    openapi_schema,
    rules_with_paths,
    structural_problems,
)

KUBERNETES_VERSIONS = ["1.33.0", kubernetes_validate.latest_version()]

CRDS = {crd["spec"]["names"]["kind"]: crd for crd in all_crds()}


def test_the_committed_crd_files_are_exactly_what_the_model_generates():
    expected = crd_files()
    committed = {path.name: path.read_text(encoding="utf-8") for path in DEFAULT_OUT.glob("*")}
    assert committed == expected, (
        f"the CRD files under {DEFAULT_OUT} differ from the model: run `{REGENERATE}`"
        " and commit them"
    )


def test_the_asyncactor_schema_render_reads_is_exactly_the_crds():
    # `asya render` checks what it writes with it (asya never imports the operator).
    committed = PACKAGED_SCHEMA.read_text(encoding="utf-8")
    assert committed == packaged_schema(), f"{PACKAGED_SCHEMA} is stale: run `{REGENERATE}`"
    assert json.loads(committed) == openapi_schema(CRDS["AsyncActor"])


def test_every_committed_crd_file_says_how_to_regenerate_it():
    for name, text in crd_files().items():
        assert text.startswith("# Generated"), name
        assert REGENERATE in text.splitlines()[1], name


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("kind", sorted(CRDS))
def test_each_crd_is_a_valid_customresourcedefinition_in_strict_mode(kind, version):
    kubernetes_validate.validate(CRDS[kind], version, strict=True)


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_each_crd_schema_is_structural(kind):
    assert structural_problems(openapi_schema(CRDS[kind])) == []


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object", "properties": {"a": {"$ref": "#/x"}}}, "$ref is not allowed"),
        ({"type": "object", "properties": {"a": {"description": "untyped"}}}, ".a: no type"),
        (
            {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}},
            "anyOf[0]: type is not allowed here",
        ),
        ({"type": "object", "properties": {"a": {"type": "array"}}}, "array without items"),
        (
            {"type": "object", "properties": {"a": {"type": "number", "exclusiveMinimum": 0}}},
            "exclusiveMinimum must be a boolean",
        ),
        ({"type": "string"}, "root must be of type object"),
    ],
)
def test_the_structural_checker_finds_each_rule_broken(schema, problem):
    assert any(problem in found for found in structural_problems(schema))


def defaults_with_schemas(schema: dict[str, Any], path: str = ""):
    if "default" in schema:
        yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from defaults_with_schemas(sub, f"{path}.{name}")
    if "items" in schema:
        yield from defaults_with_schemas(schema["items"], f"{path}[*]")


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_every_default_is_valid_for_its_own_field(kind):
    for path, schema in defaults_with_schemas(openapi_schema(CRDS[kind])):
        errors = list(jsonschema.Draft7Validator(schema).iter_errors(schema["default"]))
        assert errors == [], path


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_every_cel_rule_compiles_and_has_a_message(kind):
    for path, rule in rules_with_paths(openapi_schema(CRDS[kind])):
        compile_rule(rule["rule"])
        assert rule["message"], path


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_the_scale_subresource_and_printer_columns_point_at_fields_the_schema_has(kind):
    crd = CRDS[kind]
    (version,) = crd["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    paths = list(version.get("subresources", {}).get("scale", {}).values())
    paths += [c["jsonPath"] for c in version["additionalPrinterColumns"]]
    for path in paths:
        if path.startswith(".metadata."):
            continue
        node = schema
        for part in _path_parts(path):
            if isinstance(part, tuple):  # a filter: a list's items, by a field they have
                node = node["items"]
                assert part[0] in node["properties"], path
            else:
                node = node["properties"][part]
        assert "type" in node, path


def _path_parts(path: str) -> list[str | tuple[str, str]]:
    """`.status.conditions[?(@.type=="Ready")].reason` as its fields and filters:
    ["status", "conditions", ("type", "Ready"), "reason"]."""
    parts: list[str | tuple[str, str]] = []
    for match in re.finditer(r'\.(\w+)|\[\?\(@\.(\w+)=="([^"]*)"\)\]', path):
        field, key, value = match.groups()
        parts.append(field if field is not None else (key, value))
    return parts


@pytest.mark.parametrize(
    ("kind", "scope", "has_scale"),
    [
        ("AsyncActor", "Namespaced", True),
        ("ActorGroup", "Namespaced", True),
        ("ResourcePool", "Cluster", False),
        ("Cohort", "Cluster", False),
    ],
)
def test_each_kind_has_its_scope_a_status_and_a_scale_where_keda_drives_it(kind, scope, has_scale):
    (version,) = CRDS[kind]["spec"]["versions"]

    assert CRDS[kind]["spec"]["scope"] == scope
    assert version["subresources"]["status"] == {}
    assert ("scale" in version["subresources"]) is has_scale


# The short names of the CRDs a cluster running asya may also have, as their projects define
# them (Kueue v0.20, Volcano, KEDA v2.20): `kubectl get <short name>` must mean one kind.
THEIR_SHORT_NAMES = {
    "kueue.x-k8s.io": {"flavor", "flavors", "rf", "co", "cq", "queue", "queues", "lq", "ac"}
    | {"wpc", "kwl", "kueueworkload", "kueueworkloads"},
    "scheduling.volcano.sh": {"pg", "podgroup-v1beta1", "q", "queue-v1beta1"},
    "keda.sh": {"so", "sj", "ta", "triggerauth", "cta", "clustertriggerauth"},
}


def test_every_kind_has_a_short_name_no_other_project_s_crd_has():
    ours = {kind: crd["spec"]["names"].get("shortNames", []) for kind, crd in CRDS.items()}
    theirs = set().union(*THEIR_SHORT_NAMES.values())

    assert ours == {
        "AsyncActor": ["aa"],
        "ResourceFlavor": ["arf"],
        "ResourcePool": ["pool"],
        "Cohort": ["acoh"],
        "ActorGroup": ["ag"],
    }
    assert theirs.isdisjoint(name for names in ours.values() for name in names)
    # `kubectl get asya` lists asya's objects, whatever else is installed.
    assert {kind: crd["spec"]["names"]["categories"] for kind, crd in CRDS.items()} == {
        kind: ["asya"] for kind in CRDS
    }


@pytest.mark.parametrize(
    ("kind", "condition"),
    [("AsyncActor", "Ready"), ("ActorGroup", "Ready"), ("ResourcePool", "Active")],
)
def test_kubectl_get_shows_the_condition_and_its_reason_first(kind, condition):
    (version,) = CRDS[kind]["spec"]["versions"]

    first, second = version["additionalPrinterColumns"][:2]

    assert (first["name"], first["jsonPath"]) == (
        condition,
        f'.status.conditions[?(@.type=="{condition}")].status',
    )
    assert (second["name"], second["jsonPath"]) == (
        "Reason",
        f'.status.conditions[?(@.type=="{condition}")].reason',
    )
