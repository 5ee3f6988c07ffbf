"""Which Python values a payload may hold: those JSON carries faithfully; where one is not.

msgspec encodes more than JSON's own values, and not all of it arrives as it was sent: NaN and
±Infinity become null, a set becomes a list in arbitrary order, bytes become base64 text, dates,
UUIDs and decimals become strings, an int key a string key, and an integer past 64 bits is
refused by the next hop. numpy values are refused without saying where. So a payload holding
any of these fails where it is produced, and `unfaithful_value` says where (`payload.scores[3]`)
and how to fix it.

Converted on purpose, because the value arrives intact: tuples (named tuples too) become lists,
dict and list subclasses their plain kind, enum members whose value is a str, int or float that
value, dataclasses and msgspec Structs objects of their fields.

Pure; no asya imports. `asya.envelope` walks a payload only when its cheap test fails (the
encoded payload does not decode back equal), so a payload of plain JSON values never pays for
the walk.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import math
import uuid
from typing import Any, Final

import msgspec

MIN_INT: Final = -(2**63)
MAX_INT: Final = 2**64 - 1
"""The integers every hop carries: the runtime's msgpack frames hold 64 bits."""

_SHOWN_CHARS: Final = 60
"""How much of a value's repr a message shows."""

_ALWAYS_FINE: Final = frozenset({bool, type(None)})
_TIMES: Final = (datetime.datetime, datetime.date, datetime.time)
_BYTES: Final = (bytes, bytearray, memoryview)


class _Place:
    """Where a value sits in the payload; rendered only for the value that fails."""

    __slots__ = ("parent", "step")

    def __init__(self, parent: _Place | None, step: str | int) -> None:
        self.parent = parent
        self.step = step

    def render(self) -> str:
        steps: list[str | int] = []
        place: _Place | None = self
        while place is not None:
            steps.append(place.step)
            place = place.parent
        root, *rest = reversed(steps)
        return str(root) + "".join(_rendered_step(step) for step in rest)


def _rendered_step(step: str | int) -> str:
    if isinstance(step, int):
        return f"[{step}]"
    if step.isidentifier():
        return f".{step}"
    return f"[{_shown(step)}]"


def unfaithful_value(payload: Any, root: str = "payload") -> str | None:
    """Where `payload` first holds a value JSON does not carry faithfully, and why; None if it
    holds none. The answer reads `<root>.scores[3] is nan: ...` and names the fix."""
    stack: list[tuple[Any, _Place]] = [(payload, _Place(None, root))]
    seen: set[int] = set()
    while stack:
        value, place = stack.pop()
        if type(value) in _ALWAYS_FINE or (type(value) is str and value.isascii()):
            continue
        children = _children(value)
        if children is None:
            problem = _leaf_problem(value)
            if problem is not None:
                return f"{place.render()} {problem}"
            continue
        if isinstance(children, str):
            return f"{place.render()} {children}"
        if id(value) in seen:  # shared, or a cycle: its values were looked at once already
            continue
        seen.add(id(value))
        # Reversed onto the stack, so the first bad value in document order is the one named.
        stack.extend((child, _Place(place, step)) for step, child in reversed(children))
    return None


def _children(value: Any) -> list[tuple[str | int, Any]] | str | None:
    """A container's (step, child) pairs; a problem with its keys; None for a leaf."""
    if isinstance(value, dict):
        for key in value:
            if not _is_text(key):
                return (
                    f"has the key {_shown(key)} ({_type_name(key)}): JSON object keys are"
                    " strings (it would arrive as a string); use str keys"
                )
        return list(value.items())
    if isinstance(value, list | tuple):
        return list(enumerate(value))
    if isinstance(value, msgspec.Struct):
        return [(name, getattr(value, name)) for name in value.__struct_fields__]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]
    return None


def _is_text(value: Any) -> bool:
    return type(value) is str or (isinstance(value, str) and isinstance(value, enum.Enum))


def _leaf_problem(value: Any) -> str | None:
    """What is wrong with a value that holds no others; None when JSON carries it."""
    shown = _shown(value)
    if _is_text(value):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"is {shown}: it holds a lone surrogate, which is not valid Unicode"
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and (type(value) is int or isinstance(value, enum.Enum)):
        if MIN_INT <= value <= MAX_INT:
            return None
        return (
            f"is {shown}: outside the 64-bit range every hop carries (-2**63 .. 2**64-1);"
            " send it as a string"
        )
    if isinstance(value, float) and (type(value) is float or isinstance(value, enum.Enum)):
        if math.isfinite(value):
            return None
        return (
            f"is {shown}: JSON has no NaN or Infinity (it would arrive as null); send None,"
            " or the number as a string"
        )
    return _not_json(value, shown)


def _not_json(value: Any, shown: str) -> str:
    """The problem with a value that is not one of JSON's own, and its fix."""
    head = f"is {shown} ({_type_name(value)})"
    if isinstance(value, set | frozenset):
        return (
            f"{head}: JSON has no sets (it would arrive as a list in arbitrary order); send"
            " sorted(...) or list(...)"
        )
    if isinstance(value, _BYTES):
        return (
            f"{head}: JSON has no bytes (they would arrive as base64 text); send text"
            " (.decode()), base64 you decode yourself (base64.b64encode(...).decode()), or a"
            " reference such as an object-store URL"
        )
    if isinstance(value, _TIMES):
        return (
            f"{head}: JSON has no dates or times (it would arrive as a string); send"
            " .isoformat() and parse it where it is read"
        )
    if isinstance(value, datetime.timedelta):
        return (
            f"{head}: JSON has no durations (it would arrive as an ISO 8601 string); send"
            " .total_seconds()"
        )
    if isinstance(value, uuid.UUID):
        return f"{head}: JSON has no UUIDs (it would arrive as a string); send str(...)"
    if isinstance(value, decimal.Decimal):
        return (
            f"{head}: JSON has no decimals (it would arrive as a string); send str(...) to keep"
            " every digit, or float(...)"
        )
    if isinstance(value, enum.Enum):
        return f"{head}: only enum members whose value is a str, int or float travel; send .value"
    if callable(getattr(value, "tolist", None)):  # numpy, and arrays and tensors like it
        fix = (
            ".item() (arrays: .tolist())"
            if getattr(value, "ndim", None) == 0
            else ".tolist() (scalars: .item())"
        )
        return f"{head}, which JSON cannot carry: convert it with {fix}"
    if callable(getattr(value, "model_dump", None)):  # pydantic
        return f"{head}, which JSON cannot carry: convert it with .model_dump()"
    return (
        f"{head}, which is not a JSON value: convert it to a dict, list, str, int, float, bool"
        " or None"
    )


def _type_name(value: Any) -> str:
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a value whose repr raises is still named by its type
        return f"<{_type_name(value)}>"
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"
