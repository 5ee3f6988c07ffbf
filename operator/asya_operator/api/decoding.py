"""Custom resources as the cluster stores them, checked against their CRD and decoded one at a
time into the typed model.

A stored object may be one the operator cannot take (written before a CRD change, or past an
API server that did not validate it): it is refused alone, with a message that names the field,
and never stops the operator from reading its neighbours. The CRD's CEL rules and defaults are
applied in Python, read from the same generated schema as the CRDs (`schema`): one source for
the rules, which the tests (`cr_validation`) check the CRDs with too. `self` is bound to the
object at the rule's path, typed as the schema types it (a `number` is a CEL double even when
written `2`), after the schema's defaults are filled in, as the API server does.
"""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import celpy
import msgspec
from celpy import celtypes
from celpy.adapter import json_to_cel

from asya import typeinfo
from asya.errors import ActorDefinitionError
from asya_operator.api.schema import structural_schema

T = TypeVar("T")

_log = logging.getLogger(__name__)


class StoredSpecError(ActorDefinitionError):
    """A stored custom resource does not fit the operator's model; the message names the field
    (`$.spec.scaling.maxReplicas`) and what it expected."""


def decode(body: Mapping[str, Any], type_: type[T]) -> T:
    """`body` (a stored object) as `type_`.

    Raises:
        StoredSpecError: it does not fit; the message names the field and how to fix it.
    """
    name = body.get("metadata", {}).get("name")
    what = f"{body.get('kind', type_.__name__)} {name}"
    try:
        decoded = typeinfo.convert(dict(body), type_)
    except msgspec.ValidationError as exc:
        raise StoredSpecError(
            f"{what} cannot be used: {exc}; fix the field named and apply it again", actor=name
        ) from exc
    # The decode checks each field's own limits; the CRD's rules across fields are checked here.
    broken = broken_rules(dict(body), type(decoded)) if isinstance(decoded, msgspec.Struct) else []
    if broken:
        raise StoredSpecError(
            f"{what} breaks its CRD's rules: {'; '.join(broken)}; fix it and apply it again",
            actor=name,
        )
    return decoded


def decodable(bodies: Iterable[Mapping[str, Any]], type_: type[T]) -> list[T]:
    """Those of `bodies` that decode as `type_`; each other one is logged and left out."""
    found = []
    for body in bodies:
        try:
            found.append(decode(body, type_))
        except StoredSpecError as exc:
            meta = body.get("metadata", {})
            where = f"{meta.get('namespace')}/{meta.get('name')}"
            _log.warning("left out of this reconcile", extra={"object": where, "error": str(exc)})
    return found


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
