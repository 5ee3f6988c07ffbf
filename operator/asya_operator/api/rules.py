"""The CEL rules and defaults a CRD carries, applied in Python to a stored object.

The CRDs are generated from the typed model (`crds`), rules (`VALIDATIONS`) included, and the
API server enforces them on every write; an object stored before a rule existed, or past a
server that did not check, is not. The operator checks the same rules, read from the same
generated schema, when it decodes (`cr_decoding`), and the tests (`cr_validation`) check the
CRDs with them: one source for the rules. `self` is bound to the object at the rule's path,
typed as the schema types it (a `number` is a CEL double even when written `2`), after the
schema's defaults are filled in, as the API server does.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import celpy
import msgspec
from celpy import celtypes
from celpy.adapter import json_to_cel

from asya_operator.api.crds import structural_schema

__all__ = ["apply_defaults", "broken_rules", "cel_violations", "compile_rule", "to_cel"]


def apply_defaults(obj: Any, schema: dict[str, Any]) -> Any:
    """`obj` with the schema's defaults filled in, top-down (a defaulted `{}` gets its own)."""
    obj = copy.deepcopy(obj)
    _default_in_place(obj, schema)
    return obj


def _default_in_place(obj: Any, schema: dict[str, Any]) -> None:
    if isinstance(obj, dict):
        for name, sub in schema.get("properties", {}).items():
            if name not in obj and "default" in sub:
                obj[name] = copy.deepcopy(sub["default"])
            if name in obj:
                _default_in_place(obj[name], sub)
        if isinstance(schema.get("additionalProperties"), dict):
            for value in obj.values():
                _default_in_place(value, schema["additionalProperties"])
    elif isinstance(obj, list) and "items" in schema:
        for item in obj:
            _default_in_place(item, schema["items"])


@functools.cache
def _program(rule: str) -> celpy.Runner:
    env = celpy.Environment()
    return env.program(env.compile(rule))


def compile_rule(rule: str) -> None:
    """Compile a CEL rule (raises celpy's error on a syntax error)."""
    _program(rule)


def to_cel(value: Any, schema: dict[str, Any]) -> celtypes.Value:
    """`value` as a CEL value of the type the schema gives it."""
    if schema.get("x-kubernetes-preserve-unknown-fields") or schema.get(
        "x-kubernetes-int-or-string"
    ):
        return json_to_cel(value)
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", {})
        return celtypes.MapType(
            {
                celtypes.StringType(key): to_cel(item, properties.get(key, extra))
                for key, item in value.items()
            }
        )
    if kind == "array":
        return celtypes.ListType([to_cel(item, schema.get("items", {})) for item in value])
    if kind == "number":
        return celtypes.DoubleType(float(value))
    if kind == "integer":
        return celtypes.IntType(value)
    if kind == "boolean":
        return celtypes.BoolType(value)
    if kind == "string":
        return celtypes.StringType(value)
    return json_to_cel(value)


def cel_violations(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """The message of every CEL rule `obj` breaks, each prefixed with the rule's path."""
    found = []
    for rule in schema.get("x-kubernetes-validations", []):
        result = _program(rule["rule"]).evaluate({"self": to_cel(obj, schema)})
        if not isinstance(result, celtypes.BoolType) or not result:
            # An evaluation error (a CELEvalError value) rejects the object too.
            found.append(f"{path or '<root>'}: {rule['message']}")
    if isinstance(obj, dict):
        for name, sub in schema.get("properties", {}).items():
            if name in obj:
                found += cel_violations(obj[name], sub, f"{path}.{name}".lstrip("."))
        if isinstance(schema.get("additionalProperties"), dict):
            for name, value in obj.items():
                found += cel_violations(value, schema["additionalProperties"], f"{path}.{name}")
    elif isinstance(obj, list) and "items" in schema:
        for index, item in enumerate(obj):
            found += cel_violations(item, schema["items"], f"{path}[{index}]")
    return found


@functools.cache
def _schema_of(root: type[msgspec.Struct]) -> dict[str, Any]:
    return structural_schema(root)


def broken_rules(body: Any, root: type[msgspec.Struct]) -> list[str]:
    """The message of every CEL rule of `root`'s CRD that the stored `body` breaks (after its
    defaults), each prefixed with the path it concerns; empty: the CRD would accept it."""
    schema = _schema_of(root)
    return cel_violations(apply_defaults(body, schema), schema)
