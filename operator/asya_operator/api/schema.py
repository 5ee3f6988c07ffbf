"""A custom resource's structural schema, built from its typed model.

`msgspec.json.schema` gives JSON Schema for a Struct; `structural_schema` turns it into what
the API server accepts (a structural OpenAPI v3 schema: every `$ref` inlined, a `type` on every
node, optional fields as plain properties, Kubernetes quantities as int-or-string, free-form
objects marked to keep their fields) and attaches each Struct's CEL rules (`VALIDATIONS`) as
`x-kubernetes-validations`. Generic over the model: the CRDs (`crds`) and the decoding of stored
objects (`decoding`) both read it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from asya_operator.api.template import Validation

_REF_PREFIX: Final = "#/$defs/"
_ROOT_FIELDS: Final = ("apiVersion", "kind", "metadata")

_Model = Mapping[str, type[msgspec.Struct]]


def structs_of(root: type[msgspec.Struct]) -> dict[str, type[msgspec.Struct]]:
    """Every Struct type `root` is made of, itself included, by name."""
    found: dict[str, type[msgspec.Struct]] = {}

    def visit(info: msgspec.inspect.Type) -> None:
        if isinstance(info, msgspec.inspect.StructType):
            if info.cls.__name__ in found:
                return
            found[info.cls.__name__] = info.cls
            for field in info.fields:
                visit(field.type)
        elif isinstance(info, msgspec.inspect.UnionType):
            for member in info.types:
                visit(member)
        elif isinstance(info, msgspec.inspect.Metadata):
            visit(info.type)
        elif isinstance(
            info,
            (
                msgspec.inspect.ListType,
                msgspec.inspect.SetType,
                msgspec.inspect.FrozenSetType,
                msgspec.inspect.VarTupleType,
            ),
        ):
            visit(info.item_type)
        elif isinstance(info, msgspec.inspect.DictType):
            visit(info.key_type)
            visit(info.value_type)

    visit(msgspec.inspect.type_info(root))
    return found


def validations_of(cls: type[msgspec.Struct]) -> tuple[Validation, ...]:
    """The CEL rules a model Struct declares on itself (none for most)."""
    rules: tuple[Validation, ...] = getattr(cls, "VALIDATIONS", ())
    return rules


def structural_schema(root: type[msgspec.Struct]) -> dict[str, Any]:
    """The structural openAPIV3Schema of the custom resource `root` (AsyncActor, ...)."""
    (ref,), defs = msgspec.json.schema_components([root], ref_template=_REF_PREFIX + "{name}")
    schema = _convert(ref, defs, structs_of(root))
    # The API server owns these: typed, never defaulted; metadata is validated by the server,
    # and the CEL rules on the root may read its name.
    for name in _ROOT_FIELDS:
        schema["properties"][name] = {
            "type": schema["properties"][name]["type"],
            "description": schema["properties"][name]["description"],
        }
    return schema


def _convert(node: dict[str, Any], defs: dict[str, Any], model: _Model) -> dict[str, Any]:
    if "$ref" in node:
        name = node["$ref"].removeprefix(_REF_PREFIX)
        # An enum (a closed set of strings, such as QueueingStrategy) is inlined as it is.
        inner = (
            _convert_struct(name, defs, model)
            if name in model
            else _convert(defs[name], defs, model)
        )
        return _merge(inner, {k: v for k, v in node.items() if k != "$ref"})
    if "anyOf" in node:
        branches = [b for b in node["anyOf"] if b.get("type") != "null"]
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        if len(branches) == 1:
            return _merge(_convert(branches[0], defs, model), rest)
        return _merge(_int_or_string(branches), rest)
    out = {k: v for k, v in node.items() if k != "title"}
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    if "items" in out:
        out["items"] = _convert(out["items"], defs, model)
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _convert(out["additionalProperties"], defs, model)
    if (
        out.get("type") == "object"
        and "properties" not in out
        and "additionalProperties" not in out
    ):
        out["x-kubernetes-preserve-unknown-fields"] = True
    if out.get("default") in (None, [], {}):
        out.pop("default", None)
    if "description" in out:
        out["description"] = inspect.cleandoc(out["description"])
    return out


def _convert_struct(name: str, defs: dict[str, Any], model: _Model) -> dict[str, Any]:
    cls = model[name]
    component = defs[name]
    properties = {
        key: _convert(value, defs, model) for key, value in component["properties"].items()
    }
    for field in msgspec.structs.fields(cls):
        # A sub-object with a default of its own: `{}`, which the API server fills in from the
        # sub-object's own defaults.
        if (
            field.default_factory is not msgspec.NODEFAULT
            and properties[field.encode_name].get("type") == "object"
            and "properties" in properties[field.encode_name]
        ):
            properties[field.encode_name]["default"] = {}
    out: dict[str, Any] = {
        "type": "object",
        "description": inspect.cleandoc(component.get("description", name)),
        "properties": properties,
    }
    if component.get("required"):
        out["required"] = component["required"]
    rules = validations_of(cls)
    if rules:
        out["x-kubernetes-validations"] = [msgspec.to_builtins(rule) for rule in rules]
    return out


def _int_or_string(branches: list[dict[str, Any]]) -> dict[str, Any]:
    # A Kubernetes quantity: `2` or "500m". The structural form puts the pattern outside anyOf.
    types = sorted(b.get("type", "") for b in branches)
    if types != ["integer", "string"]:
        raise TypeError(f"no structural form for a union of {types}")
    out: dict[str, Any] = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    }
    for branch in branches:
        if "pattern" in branch:
            out["pattern"] = branch["pattern"]
    return out


def _merge(inner: dict[str, Any], outer: dict[str, Any]) -> dict[str, Any]:
    # Keys given where a type is used (description, default) win over the type's own.
    merged = {**inner, **outer}
    if merged.get("default") in (None, []) or (
        merged.get("default") == {} and "properties" not in merged
    ):
        merged.pop("default", None)
    if "description" in merged:
        merged["description"] = inspect.cleandoc(merged["description"])
    return merged
