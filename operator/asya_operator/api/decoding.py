"""Custom resources as the cluster stores them, decoded into the typed model one at a time.

A stored object may be one the operator cannot take (written before a CRD change, or past an
API server that did not validate it): it is refused alone, with a message that names the field,
and never stops the operator from reading its neighbours. Used by `cluster` (the namespace's
and the cluster's actors and groups) and `controller` (the object a handler is called for).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import msgspec

from asya import typeinfo
from asya.errors import ActorDefinitionError
from asya_operator.api.rules import broken_rules

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
            fields = {"object": meta.get("name"), "namespace": meta.get("namespace")}
            _log.warning(f"left out of this reconcile: {exc}", extra=fields)
    return found
