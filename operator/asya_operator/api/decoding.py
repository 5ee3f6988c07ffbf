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

import collections
import functools
import hashlib
import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Final, TypeVar

import msgspec

from asya import typeinfo
from asya.crd_rules import (
    apply_defaults,
    cel_violations,
    closest,
    duplicate_keys,
    unknown_fields,
    without_nulls,
)
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


def _unknown_metadata(body: Mapping[str, Any]) -> list[str]:
    metadata = body.get("metadata")
    if not isinstance(metadata, dict):
        return []
    return [
        f"metadata.{key}" + closest(key, _OBJECT_META_FIELDS, "metadata")
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


@functools.cache
def _schema_of(root: type[msgspec.Struct]) -> dict[str, Any]:
    return structural_schema(root)


RULES_CHECKED_KEPT: Final = 4096
"""How many objects' rule results are remembered (`broken_rules`): a cluster's worth of actors
and groups for a reconcile's neighbours, bounded (about 100 bytes each)."""

_checked: collections.OrderedDict[tuple[type[Any], bytes], tuple[str, ...]] = (
    collections.OrderedDict()
)
_checked_lock = threading.Lock()  # decodes run on the cluster client's worker threads too


def broken_rules(body: Mapping[str, Any], root: type[msgspec.Struct]) -> list[str]:
    """The message of every CEL rule of `root`'s CRD that the stored `body` breaks (after its
    defaults), each prefixed with the path it concerns; empty: the CRD would accept it.

    The CRDs' rules read an object's name and spec, nothing else (`RULES_READ`; a test holds
    the CRDs to it): they are evaluated on those two alone, once per content, and the result is
    remembered under a digest of them for the last `RULES_CHECKED_KEPT` objects. A reconcile
    reads every actor of its namespace, and evaluating each one's rules every time
    (milliseconds each through cel-python, holding the GIL) made a burst of N actors cost N²
    evaluations."""
    schema = _schema_of(root)
    read = _rules_input(body)
    try:
        digest = hashlib.blake2b(msgspec.json.encode(read), digest_size=16).digest()
    except (TypeError, msgspec.EncodeError):  # not from JSON (a YAML date, say): not remembered
        return cel_violations(apply_defaults(read, schema), schema)
    key = (root, digest)
    with _checked_lock:
        known = _checked.get(key)
        if known is not None:
            _checked.move_to_end(key)
            return list(known)
    found = tuple(cel_violations(apply_defaults(read, schema), schema))
    with _checked_lock:
        _checked[key] = found
        while len(_checked) > RULES_CHECKED_KEPT:
            _checked.popitem(last=False)
    return list(found)


RULES_READ: Final = ("metadata.name", "spec")
"""What of an object the CRDs' rules read: `self.metadata.name` at the root, and the spec."""


def _rules_input(body: Mapping[str, Any]) -> dict[str, Any]:
    """`body` as far as its rules read it: its metadata's name and its spec (status, labels,
    managedFields and the rest left out, which also spares converting them for CEL)."""
    read: dict[str, Any] = {}
    metadata = body.get("metadata")
    if isinstance(metadata, Mapping):
        read["metadata"] = {"name": metadata["name"]} if "name" in metadata else {}
    elif "metadata" in body:
        read["metadata"] = metadata
    if "spec" in body:
        read["spec"] = body["spec"]
    return read
