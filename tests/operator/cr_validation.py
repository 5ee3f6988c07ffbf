"""What the API server does with a custom resource, as far as a CRD decides it, for tests.

There is no cluster here, so the steps that a CRD drives are done in Python: defaulting from
the schema's `default`s, validation against the openAPIV3Schema (jsonschema's Draft 7, which
reads the schema keywords our CRDs use the same way), and every CEL rule
(`x-kubernetes-validations`) evaluated with cel-python, `self` bound to the object at the
rule's path, typed as the schema types it (a `number` is a CEL double even when written `2`).
`structural_problems` checks the structural-schema rules our CRDs rely on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonschema

from asya.crd_rules import apply_defaults, cel_violations


def openapi_schema(crd: dict[str, Any]) -> dict[str, Any]:
    """The openAPIV3Schema of a CRD's only version."""
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def schema_errors(obj: Any, schema: dict[str, Any]) -> list[str]:
    """jsonschema's messages for `obj` against `schema`, each with the path it concerns."""
    validator = jsonschema.Draft7Validator(schema)
    return [
        f"{'.'.join(str(p) for p in error.absolute_path)}: {error.message}"
        for error in validator.iter_errors(obj)
    ]


def unknown_fields(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Fields of `obj` the schema does not know (the API server would prune them)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found = []
    if isinstance(obj, dict) and "properties" in schema:
        for name, value in obj.items():
            sub = schema["properties"].get(name)
            if sub is None:
                found.append(f"{path}.{name}".lstrip("."))
            elif name != "metadata" or path:
                found += unknown_fields(value, sub, f"{path}.{name}")
    elif isinstance(obj, dict) and isinstance(schema.get("additionalProperties"), dict):
        for name, value in obj.items():
            found += unknown_fields(value, schema["additionalProperties"], f"{path}.{name}")
    elif isinstance(obj, list) and "items" in schema:
        for index, item in enumerate(obj):
            found += unknown_fields(item, schema["items"], f"{path}[{index}]")
    return found


def rules_with_paths(
    schema: dict[str, Any], path: str = ""
) -> Iterator[tuple[str, dict[str, str]]]:
    """Every CEL rule in `schema`, with the path of the object it is attached to."""
    for rule in schema.get("x-kubernetes-validations", []):
        yield path, rule
    for name, sub in schema.get("properties", {}).items():
        yield from rules_with_paths(sub, f"{path}.{name}")
    if "items" in schema:
        yield from rules_with_paths(schema["items"], f"{path}[*]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from rules_with_paths(schema["additionalProperties"], f"{path}.*")


def rejections(obj: dict[str, Any], crd: dict[str, Any]) -> list[str]:
    """Why the API server would refuse `obj` under `crd` (empty: it is accepted).

    As the server does: defaults first, then the schema, then the CEL rules (only on an object
    the schema accepts, since a rule may rely on a field's type).
    """
    schema = openapi_schema(crd)
    defaulted = apply_defaults(obj, schema)
    errors = schema_errors(defaulted, schema)
    if errors:
        return errors
    return cel_violations(defaulted, schema)


_JUNCTORS = ("anyOf", "allOf", "oneOf", "not")
_FORBIDDEN_IN_JUNCTORS = ("type", "description", "default", "additionalProperties", "nullable")


def structural_problems(schema: dict[str, Any], path: str = "", *, root: bool = True) -> list[str]:
    """Where `schema` breaks the structural-schema rules (empty: it is structural).

    The rules: no `$ref` or `definitions`; a `type` on every node (unless it is int-or-string or
    keeps unknown fields); `properties` and `additionalProperties` not both; an array has
    `items`; inside anyOf/allOf/oneOf/not, no type, description, default, additionalProperties
    or nullable; int-or-string's anyOf is exactly integer, string; a root of type object; and,
    as apiextensions v1 reads OpenAPI v3.0, exclusive bounds are booleans.
    """
    problems = []
    where = path or "<root>"
    if root and schema.get("type") != "object":
        problems.append(f"{where}: the root must be of type object")
    for key in ("$ref", "definitions", "$defs"):
        if key in schema:
            problems.append(f"{where}: {key} is not allowed")
    int_or_string = schema.get("x-kubernetes-int-or-string")
    if (
        "type" not in schema
        and not int_or_string
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        problems.append(f"{where}: no type")
    if "properties" in schema and "additionalProperties" in schema:
        problems.append(f"{where}: both properties and additionalProperties")
    if schema.get("type") == "array" and "items" not in schema:
        problems.append(f"{where}: an array without items")
    if int_or_string and schema.get("anyOf") != [{"type": "integer"}, {"type": "string"}]:
        problems.append(f"{where}: int-or-string must be anyOf [integer, string]")
    for key in ("exclusiveMinimum", "exclusiveMaximum"):
        if key in schema and not isinstance(schema[key], bool):
            problems.append(f"{where}: {key} must be a boolean in OpenAPI v3.0")
    for junctor in _JUNCTORS:
        branches = schema.get(junctor, [])
        for index, branch in enumerate(branches if isinstance(branches, list) else [branches]):
            allowed_type = int_or_string and junctor == "anyOf"
            for key in _FORBIDDEN_IN_JUNCTORS:
                if key in branch and not (key == "type" and allowed_type):
                    problems.append(f"{where}.{junctor}[{index}]: {key} is not allowed here")
    for name, sub in schema.get("properties", {}).items():
        problems += structural_problems(sub, f"{path}.{name}", root=False)
    if isinstance(schema.get("items"), dict):
        problems += structural_problems(schema["items"], f"{path}[*]", root=False)
    if isinstance(schema.get("additionalProperties"), dict):
        problems += structural_problems(schema["additionalProperties"], f"{path}.*", root=False)
    return problems
