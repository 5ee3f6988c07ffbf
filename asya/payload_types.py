"""Typed payloads: the dataclass, msgspec Struct or pydantic model a handler's payload is.

A handler whose payload parameter is annotated with such a class gets an instance of it, built
from the envelope's JSON payload and validated at the edge (`msgspec.convert` for dataclasses and
Structs, the model's own `model_validate` for pydantic), and may return or yield instances of any
such class, which are turned back into JSON-able data and checked against their own field types.
A payload that does not fit, or an output that does not convert, is reported naming the field
(`payload.items[2].score`), so the call fails on the item that is wrong, not on a later actor.

`asya.actor` asks `payload_type_of` once, at decoration; `asya.handler` loads payloads and
converts outputs. pydantic is never imported here: a pydantic model is recognised through the
pydantic module its class was built with, already loaded by whoever defined the class, so asya
does not depend on it.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import sys
from collections.abc import Iterator, Mapping
from typing import Any, Final

import msgspec

from asya import typeinfo
from asya.envelope import Payload
from asya.errors import EnvelopeError


class PayloadMismatchError(EnvelopeError):
    """A payload does not fit the model its handler declares, or a returned model instance does
    not convert to JSON-able data; the message names the field."""


class ModelKind(enum.Enum):
    """Which library a payload model belongs to, and so which converts it."""

    DATACLASS = "dataclass"
    STRUCT = "msgspec.Struct"
    PYDANTIC = "pydantic model"


@dataclasses.dataclass(frozen=True, slots=True)
class PayloadType:
    """The model class a handler's payload parameter is annotated with (a batch handler's: the
    class of each item of its list)."""

    model: type[Any]
    kind: ModelKind

    @property
    def name(self) -> str:
        return self.model.__qualname__

    def load(self, payload: Payload) -> Any:
        """`payload` (JSON-shaped data) as an instance of the model, validated.

        Raises:
            PayloadMismatchError: the payload does not fit the model; the message names the field.
        """
        if self.kind is ModelKind.PYDANTIC:
            validation_error = _pydantic().ValidationError
            try:
                return self.model.model_validate(payload)
            except validation_error as exc:
                raise PayloadMismatchError(_pydantic_problem(exc)) from None
        try:
            return typeinfo.convert(payload, self.model)
        except msgspec.ValidationError as exc:
            raise PayloadMismatchError(_msgspec_problem(exc)) from None


def model_kind(cls: object) -> ModelKind | None:
    """The kind of payload model `cls` is, or None for any other annotation."""
    if not isinstance(cls, type):
        return None
    if issubclass(cls, msgspec.Struct):
        return ModelKind.STRUCT
    if dataclasses.is_dataclass(cls):
        return ModelKind.DATACLASS
    pydantic = sys.modules.get("pydantic")
    base = getattr(pydantic, "BaseModel", None)
    if isinstance(base, type) and issubclass(cls, base):
        return ModelKind.PYDANTIC
    return None


def payload_type_of(annotation: Any) -> PayloadType | None:
    """The payload type a parameter annotated `annotation` declares; None for anything else (a
    dict, no annotation, an annotation that did not resolve)."""
    kind = model_kind(annotation)
    return None if kind is None else PayloadType(model=annotation, kind=kind)


def to_payload(value: Any) -> Payload:
    """`value` as JSON-able data: a model instance converted and checked against its own field
    types; any other value as it is.

    Raises:
        PayloadMismatchError: a field holds a value that cannot be converted or does not fit its
            declared type; the message names the field.
    """
    kind = model_kind(type(value))
    if kind is None:
        return value
    if kind is ModelKind.PYDANTIC:
        return _dump_pydantic(value)
    try:
        data = msgspec.to_builtins(value)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise PayloadMismatchError(_unconvertible(value) or f"payload: {exc}") from None
    try:
        # Round-trips what the model's own type says: a field holding the wrong type (nothing
        # checks a dataclass's fields when it is built) fails here, not at the next actor.
        typeinfo.convert(data, type(value))
    except msgspec.ValidationError as exc:
        raise PayloadMismatchError(_msgspec_problem(exc)) from None
    return data


def _dump_pydantic(value: Any) -> Payload:
    try:
        return value.model_dump(mode="json", warnings="error")
    except Exception as exc:  # pydantic_core.PydanticSerializationError, not importable here
        raise PayloadMismatchError(_unconvertible(value) or f"payload: {exc}") from None


def _pydantic() -> Any:
    # Only reached for a class that subclasses pydantic.BaseModel: the module is loaded.
    return sys.modules["pydantic"]


_MSGSPEC_PATH: Final = re.compile(r"^(?P<problem>.*) - at `\$(?P<path>.*)`$", re.DOTALL)


def _msgspec_problem(exc: msgspec.ValidationError) -> str:
    """`Expected `str`, got `int` - at `$.items[2].text`` -> `payload.items[2].text: Expected
    `str`, got `int``."""
    text = str(exc)
    found = _MSGSPEC_PATH.match(text)
    if found is None:
        return f"payload: {text}"
    return f"payload{found['path']}: {found['problem']}"


def _pydantic_problem(exc: Any) -> str:
    errors = exc.errors(include_url=False)
    first = errors[0]
    path = "payload" + "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]
    )
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{path}: {first['msg']}{more}"


def _unconvertible(value: Any, path: str = "payload") -> str | None:
    """Where in `value` the first value that cannot be converted to JSON-able data sits, and
    why; None if every part converts on its own."""
    parts = _parts(value)
    if parts is None:
        try:
            msgspec.to_builtins(value)
        except (TypeError, ValueError, OverflowError):
            kind = type(value)
            hint = (
                " (call .item() on a numpy scalar, .tolist() on an array)"
                if kind.__module__.partition(".")[0] == "numpy"
                else ""
            )
            return f"{path}: a {kind.__module__}.{kind.__qualname__} cannot be converted{hint}"
        return None
    for key, part in parts:
        found = _unconvertible(part, f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}")
        if found is not None:
            return found
    return None


def _parts(value: Any) -> Iterator[tuple[str | int, Any]] | None:
    """A container's parts with their keys (a field name, a dict key, a list index); None for a
    value that is not a container."""
    if isinstance(value, msgspec.Struct):
        return ((name, getattr(value, name)) for name in value.__struct_fields__)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
    if model_kind(type(value)) is ModelKind.PYDANTIC:
        return ((name, getattr(value, name)) for name in type(value).model_fields)
    if isinstance(value, Mapping):
        return ((str(key), part) for key, part in value.items())
    if isinstance(value, list | tuple):
        return enumerate(value)
    return None
