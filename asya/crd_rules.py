"""What the API server does with a custom resource, as far as its CRD's schema decides it.

Generic over the schema (an openAPIV3Schema, or the part of one under a field): the fields it
does not know, the nulls the server drops, keyed lists' repeated keys, the defaults it fills in,
and every CEL rule (`x-kubernetes-validations`) evaluated with cel-python, `self` bound to the
object at the rule's path, typed as the schema types it (a `number` is a CEL double even when
written `2`). The operator reads stored and submitted objects with it (`asya_operator.api.decoding`)
and `asya render` checks what it writes with it, against the CRD the operator generates: one
implementation and one source for the rules. Needs cel-python (`asya[render]`, `asya[operator]`).
"""

from __future__ import annotations

import copy
import difflib
import functools
from collections.abc import Iterable
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel


def unknown_fields(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Each field of `obj` that `schema` does not know (the API server would prune it, or refuse
    it under strict field validation), as its path, with the closest known name when there is
    one. Free-form objects (`x-kubernetes-preserve-unknown-fields`) know every field."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found = []
    if isinstance(obj, dict) and "properties" in schema:
        known = schema["properties"]
        for name, value in obj.items():
            where = f"{path}.{name}".lstrip(".")
            if name not in known:
                found.append(where + closest(name, known, path))
            else:
                found += unknown_fields(value, known[name], where)
    elif isinstance(obj, dict) and isinstance(schema.get("additionalProperties"), dict):
        for name, value in obj.items():
            found += unknown_fields(value, schema["additionalProperties"], f"{path}.{name}")
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(obj):
            found += unknown_fields(item, schema["items"], f"{path}[{index}]")
    return found


def closest(name: str, known: Iterable[str], path: str) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {f'{path}.{close[0]}'.lstrip('.')}?)" if close else ""


def duplicate_keys(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Each entry of a keyed list (`x-kubernetes-list-type: map`) whose key an entry before it
    has, as the API server refuses it ("Duplicate value"), each with its path and the fix."""
    found = []
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        keyed = schema.get("x-kubernetes-list-type") == "map"
        names = schema.get("x-kubernetes-list-map-keys", [])
        seen: set[tuple[str, ...]] = set()
        for index, item in enumerate(obj):
            where = f"{path}[{index}]"
            if keyed and isinstance(item, dict):
                key = tuple(repr(item.get(name)) for name in names)
                if key in seen:
                    given = ", ".join(f"{name} {item.get(name)!r}" for name in names)
                    found.append(
                        f"{where}: {given} is already in {path}, whose entries are keyed by"
                        f" {' and '.join(names)}: merge the two or give this one another"
                    )
                seen.add(key)
            found += duplicate_keys(item, schema["items"], where)
    elif isinstance(obj, dict):
        extra = schema.get("additionalProperties")
        for name, value in obj.items():
            sub = schema.get("properties", {}).get(name, extra if isinstance(extra, dict) else None)
            if sub is not None:
                found += duplicate_keys(value, sub, f"{path}.{name}".lstrip("."))
    return found


def without_nulls(obj: Any, schema: dict[str, Any]) -> Any:
    """`obj` without the nulls the API server drops before defaulting: a field whose schema
    does not say `nullable` is taken as absent when null (then defaulted), as in
    apiextensions' PruneNonNullableNullsWithoutDefaults; fields of a free-form object keep
    theirs (they have no schema)."""
    if isinstance(obj, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        kept = {}
        for name, value in obj.items():
            sub = properties.get(name, extra if isinstance(extra, dict) else None)
            if sub is None:
                kept[name] = value
            elif value is not None or sub.get("nullable"):
                kept[name] = without_nulls(value, sub)
        return kept
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [without_nulls(item, schema["items"]) for item in obj]
    return obj


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
    rules = schema.get("x-kubernetes-validations", [])
    try:
        bound = to_cel(obj, schema) if rules else None
    except (ValueError, OverflowError):  # celpy's integers are 64-bit, as the API server's
        return [
            f"{path or '<root>'}: holds an integer beyond 64 bits, which the API server refuses"
        ]
    for rule in rules:
        result = _program(rule["rule"]).evaluate({"self": bound})
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
