"""Custom resources as the cluster stores them, checked against their CRD and decoded one at a
time into the typed model.

A stored object may be one the operator cannot take (written before a CRD change, or past an
API server that did not validate it): it is refused alone, with a message that names the field,
and never stops the operator from reading its neighbours. The CRD's CEL rules and defaults are
applied in Python, read from the same generated schema as the CRDs (`schema`): one source for
the rules, which the tests (`cr_validation`) check the CRDs with too. `self` is bound to the
object at the rule's path, typed as the schema types it (a `number` is a CEL double even when
written `2`), after the schema's defaults are filled in, as the API server does.

Two ways in. `decode` takes an object the cluster stored. `decode_submitted` takes one as a
client submits it (`asya-operator plan`'s files, which `kubectl apply` would send), and first
does what the API server does to a request before it stores anything: a field the schema does
not know is refused, as kubectl's default strict field validation (1.27 and later) asks the
server to do, and a `null` the schema does not allow is dropped, so the field is defaulted.
"""

from __future__ import annotations

import copy
import difflib
import functools
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, TypeVar

import celpy
import msgspec
from celpy import celtypes
from celpy.adapter import json_to_cel

from asya import typeinfo
from asya.errors import ActorDefinitionError
from asya_operator.api.schema import structural_schema
from asya_operator.api.template import DNS_SUBDOMAIN_PATTERN

T = TypeVar("T")

_log = logging.getLogger(__name__)


class StoredSpecError(ActorDefinitionError):
    """A custom resource (stored, or as submitted) does not fit the operator's model; the
    message names the object, the field (`$.spec.scaling.maxReplicas`) and what to fix."""


_OBJECT_NAME_MAX_LENGTH: Final = 253
_DNS_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NAMESPACE_MAX_LENGTH: Final = 63

# ObjectMeta's fields a client may send: the API server decodes `metadata` itself, strictly,
# whatever the CRD's schema says of it (the schema may only describe name and generateName).
_OBJECT_META_FIELDS: Final = (
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
)


def decode(body: Mapping[str, Any], type_: type[T]) -> T:
    """`body` (a stored object) as `type_`.

    Fields the model does not know are passed over, not refused: the API server prunes unknown
    fields before it stores an object of a structural CRD, so a stored object has none, unless
    its CRD is newer than this operator (an upgrade that added a field), which must not stop
    the operator from taking the object.

    Raises:
        StoredSpecError: it does not fit; the message names the field and how to fix it.
    """
    return _decode(body, type_, then="apply it again")


def decode_submitted(body: Mapping[str, Any], type_: type[T]) -> T:
    """`body`, as a client would submit it to the API server, as `type_`: refused where the
    server would refuse it (a field its CRD does not know, a keyed list's entry repeated, then
    as `decode`), its nulls dropped where the server drops them.

    Raises:
        StoredSpecError: the API server would refuse it; the message names the field and the fix.
    """
    schema = _schema_of(type_) if issubclass(type_, msgspec.Struct) else {}
    unknown = unknown_fields(body, schema) + _unknown_metadata(body)
    if unknown:
        listed = "; ".join(unknown)
        it = "it" if len(unknown) == 1 else "them"
        raise StoredSpecError(
            f"{_what(body, type_)} has {'a field' if len(unknown) == 1 else 'fields'} its CRD"
            f" does not know: {listed}; the API server refuses unknown fields (kubectl apply's"
            f" strict field validation): correct or remove {it}",
            actor=body.get("metadata", {}).get("name"),
        )
    body = without_nulls(body, schema)
    duplicates = duplicate_keys(body, schema)
    if duplicates:
        raise StoredSpecError(
            f"{_what(body, type_)} repeats a list entry's key: {'; '.join(duplicates)}",
            actor=body.get("metadata", {}).get("name"),
        )
    decoded = _decode(body, type_, then="try again")
    # After the CRD's rules, whose messages on a name (an actor's, a group's) say more.
    names = _metadata_name_problems(body)
    if names:
        raise StoredSpecError(
            f"{_what(body, type_)} cannot be named so: {'; '.join(names)}",
            actor=body.get("metadata", {}).get("name"),
        )
    return decoded


def _what(body: Mapping[str, Any], type_: type[Any]) -> str:
    return f"{body.get('kind', type_.__name__)} {body.get('metadata', {}).get('name')}"


def _decode(body: Mapping[str, Any], type_: type[T], *, then: str) -> T:
    name = body.get("metadata", {}).get("name")
    what = _what(body, type_)
    try:
        decoded = typeinfo.convert(dict(body), type_)
    except msgspec.ValidationError as exc:
        raise StoredSpecError(
            f"{what} cannot be used: {exc}; fix the field named and {then}", actor=name
        ) from exc
    # The decode checks each field's own limits; the CRD's rules across fields are checked here.
    broken = broken_rules(dict(body), type(decoded)) if isinstance(decoded, msgspec.Struct) else []
    if broken:
        raise StoredSpecError(
            f"{what} breaks its CRD's rules: {'; '.join(broken)}; fix it and {then}",
            actor=name,
        )
    return decoded


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
                found.append(where + _closest(name, known, path))
            else:
                found += unknown_fields(value, known[name], where)
    elif isinstance(obj, dict) and isinstance(schema.get("additionalProperties"), dict):
        for name, value in obj.items():
            found += unknown_fields(value, schema["additionalProperties"], f"{path}.{name}")
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(obj):
            found += unknown_fields(item, schema["items"], f"{path}[{index}]")
    return found


def _unknown_metadata(body: Mapping[str, Any]) -> list[str]:
    metadata = body.get("metadata")
    if not isinstance(metadata, dict):
        return []
    return [
        f"metadata.{key}" + _closest(key, _OBJECT_META_FIELDS, "metadata")
        for key in metadata
        if key not in _OBJECT_META_FIELDS
    ]


def _metadata_name_problems(body: Mapping[str, Any]) -> list[str]:
    # The API server's own check, whatever the CRD: a custom resource's name is a DNS-1123
    # subdomain. (Its namespace, for a namespaced kind, is `namespace_problem`'s.)
    name = body.get("metadata", {}).get("name")
    if isinstance(name, str) and (
        len(name) > _OBJECT_NAME_MAX_LENGTH or not re.fullmatch(DNS_SUBDOMAIN_PATTERN, name)
    ):
        return [
            f"metadata.name {name!r} is not a Kubernetes object name: lowercase letters, digits,"
            f" '-' and '.', at most {_OBJECT_NAME_MAX_LENGTH}, starting and ending with a letter"
            " or digit; rename it"
        ]
    return []


def namespace_problem(namespace: str) -> str | None:
    """What is wrong with `namespace` as a namespaced object's `metadata.namespace` (None:
    nothing): the API server takes a DNS-1123 label. A cluster-scoped object's namespace is
    cleared by the server, not checked."""
    if len(namespace) <= _NAMESPACE_MAX_LENGTH and re.fullmatch(_DNS_LABEL, namespace):
        return None
    return (
        f"metadata.namespace {namespace!r} is not a namespace name: lowercase letters, digits"
        f" and '-', at most {_NAMESPACE_MAX_LENGTH}, starting and ending with a letter or digit"
    )


def _closest(name: str, known: Iterable[str], path: str) -> str:
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
