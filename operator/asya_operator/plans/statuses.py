"""A status as one writer writes it: typed, with the fields that writer owns.

Several writers share a CR's status: an AsyncActor's reconcile writes its replicas and
`observedGeneration`, the admission pass its admitted replicas, each writes the conditions
list whole. A `StatusPatch` is the typed status (`AsyncActorStatus`, `ActorGroupStatus`,
`ResourcePoolStatus`) and the names of the fields its writer owns: the merge patch
(`document`) writes those, an unset one as null (cleared), and leaves the others to their
writers. Whether a write would say anything new is asked here only (`changed`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

import msgspec

S = TypeVar("S", bound=msgspec.Struct)


@dataclasses.dataclass(frozen=True)
class StatusPatch(Generic[S]):
    """The typed `status`, of which this writer owns `fields` (Python names)."""

    status: S
    fields: frozenset[str]

    @classmethod
    def of(cls, status: S, fields: Iterable[str]) -> StatusPatch[S]:
        """The patch of `status`'s `fields`.

        Raises:
            ValueError: a name is not a field of the status.
        """
        names = frozenset(fields)
        unknown = names - {f.name for f in msgspec.structs.fields(type(status))}
        if unknown:
            raise ValueError(f"not fields of {type(status).__name__}: {sorted(unknown)}")
        return cls(status, names)

    def document(self) -> dict[str, Any]:
        """The merge patch's `status`: the owned fields as the API has them (camelCase), an
        unset one as null; inside them (conditions, instances) unset fields left out."""
        encoded = msgspec.to_builtins(self.status)
        return {
            field.encode_name: _without_none(encoded[field.encode_name])
            for field in msgspec.structs.fields(type(self.status))
            if field.name in self.fields
        }

    def changed(self, before: S | None) -> bool:
        """Whether writing this says anything `before` (the status as stored) does not: the
        owned fields compared, conditions by type, status, reason, message and the generation
        they were set from (their transition times aside)."""
        return before is None or self._essence(self.status) != self._essence(before)

    def _essence(self, status: S) -> dict[str, Any]:
        essence: dict[str, Any] = {}
        for name in sorted(self.fields):
            value = getattr(status, name)
            if name == "conditions":
                essence[name] = sorted(
                    (c.type, c.status, c.reason, c.message, c.observed_generation or 0)
                    for c in value or ()
                )
            else:
                essence[name] = _without_none(msgspec.to_builtins(value))
        return essence


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(item) for item in value]
    return value
