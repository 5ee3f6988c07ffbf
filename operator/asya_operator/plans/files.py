"""Everything the operator would create for a set of CRs: `asya-operator plan`'s core.

Pure: documents (already parsed from YAML, each with where it came from) in, typed CRs and then
the planned objects out. No cluster is asked anything, so what a cluster would hold is taken
from the documents: a flavor must be among them (ResourceFlavors are cluster-wide), and the
broker Secrets are assumed to exist. Each CR is checked as the API server would check it on
`kubectl apply` (`asya_operator.api.decoding.decode_submitted`: fields the CRD does not know,
the schema's types and bounds, the CEL rules, all read from the model the CRDs are generated
from), so a file `plan` takes is one the cluster takes. A bad document is a `CrError` naming
the file, the document, the object, the field and what to fix. An ActorGroup's objects are
planned for each instance it asks for (`desired_instances`) at full size (on a cluster,
admission decides how many run); ResourcePools, Cohorts and Namespaces are read too, and
`asya_operator.plans.whatif` turns them and the pooled actors and groups into the admission
what-if.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from asya.errors import AsyaError
from asya.routing import END_ACTORS
from asya_operator.api.actor import AsyncActor
from asya_operator.api.decoding import StoredSpecError, decode_submitted, namespace_problem
from asya_operator.api.flavor import ResourceFlavor
from asya_operator.api.group import ActorGroup
from asya_operator.api.metadata import actor_name, actor_namespace
from asya_operator.api.pool import Cohort, ResourcePool
from asya_operator.api.template import GROUP, VERSION
from asya_operator.plans.names import NameOwner, name_keepers, refusals

_API_VERSION = f"{GROUP}/{VERSION}"
_Cr = AsyncActor | ResourceFlavor | ResourcePool | Cohort | ActorGroup
_MODELS: dict[str, type[_Cr]] = {
    "AsyncActor": AsyncActor,
    "ResourceFlavor": ResourceFlavor,
    "ResourcePool": ResourcePool,
    "Cohort": Cohort,
    "ActorGroup": ActorGroup,
}


class CrError(AsyaError):
    """A custom resource that cannot be planned: the message says where and what to fix."""


@dataclasses.dataclass(frozen=True)
class Document:
    """One YAML document and where it came from (`source` is `FILE: document N`)."""

    source: str
    body: Any


@dataclasses.dataclass(frozen=True)
class Crs:
    """The custom resources read: actors and groups (in their namespaces), cluster-wide
    flavors, pools and cohorts by name, and the labels of the Namespaces the files define."""

    actors: list[tuple[str, AsyncActor]]
    flavors: dict[str, ResourceFlavor]
    pools: dict[str, ResourcePool] = dataclasses.field(default_factory=dict)
    cohorts: dict[str, Cohort] = dataclasses.field(default_factory=dict)
    groups: list[tuple[str, ActorGroup]] = dataclasses.field(default_factory=list)
    namespace_labels: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    ages: dict[tuple[str, str, str], int] = dataclasses.field(default_factory=dict)
    """(kind, namespace, name) of an actor or group -> its document's position (older first)."""


def _decode(doc: Document) -> _Cr | None:
    body = doc.body
    if body is None:
        return None
    if not isinstance(body, dict):
        raise CrError(f"{doc.source}: not a mapping: a CR has apiVersion, kind, metadata, spec")
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if not str(api_version).startswith(f"{GROUP}/"):
        return None  # not ours (a Secret, a ConfigMap...): the operator makes nothing for it
    if api_version != _API_VERSION or kind not in _MODELS:
        *kinds, last = _MODELS
        raise CrError(
            f"{doc.source}: {api_version} {kind} is not an asya CR: use apiVersion"
            f" {_API_VERSION} and kind {', '.join(kinds)} or {last}"
        )
    name = (body.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise CrError(f"{doc.source}: {kind} without metadata.name: give it a name")
    try:
        return decode_submitted(body, _MODELS[kind])
    except StoredSpecError as exc:
        raise CrError(f"{doc.source}: {exc}") from exc


def _check_actor_name(source: str, name: str) -> None:
    # The name's form is a CEL rule of the CRD (checked by the decode); this one is the
    # operator's: the end actors' names are taken in every namespace.
    if name in END_ACTORS:
        raise CrError(
            f"{source}: AsyncActor/{name}: {name} is an end actor, which the operator makes"
            " for every namespace: give the actor another name"
        )


def _check_namespace(source: str, what: str, metadata: dict[str, Any]) -> None:
    # The namespace the CR names (the --namespace option's is the caller's to check).
    namespace = metadata.get("namespace")
    problem = namespace_problem(namespace) if isinstance(namespace, str) else None
    if problem is not None:
        raise CrError(f"{source}: {what}: {problem}; name an existing namespace")


def _namespace_labels(body: Any) -> tuple[str, dict[str, str]] | None:
    # A Namespace in the files says which labels a pool's namespaceSelector sees on it.
    if not isinstance(body, dict) or (body.get("apiVersion"), body.get("kind")) != (
        "v1",
        "Namespace",
    ):
        return None
    metadata = body.get("metadata") or {}
    return str(metadata.get("name")), dict(metadata.get("labels") or {})


class _Reader:
    """Collects the CRs of many documents, refusing one defined twice."""

    def __init__(self, default_namespace: str) -> None:
        self.default_namespace = default_namespace
        self.crs = Crs(actors=[], flavors={})
        self.sources: dict[tuple[str, str, str], str] = {}

    def add(self, doc: Document) -> None:
        labels = _namespace_labels(doc.body)
        if labels is not None:
            self.crs.namespace_labels[labels[0]] = labels[1]
            return
        cr = _decode(doc)
        if isinstance(cr, ResourceFlavor):
            self.crs.flavors[cr.metadata["name"]] = cr
        elif isinstance(cr, ResourcePool):
            self.crs.pools[self._once(doc, "ResourcePool", "", cr.metadata["name"])] = cr
        elif isinstance(cr, Cohort):
            self.crs.cohorts[self._once(doc, "Cohort", "", cr.metadata["name"])] = cr
        elif isinstance(cr, ActorGroup):
            namespace = self._namespace(cr.metadata)
            _check_namespace(doc.source, f"ActorGroup {cr.metadata['name']}", cr.metadata)
            self._once(doc, "ActorGroup", namespace, cr.metadata["name"])
            self.crs.groups.append((namespace, cr))
        elif isinstance(cr, AsyncActor):
            name, namespace = actor_name(cr), actor_namespace(cr, self.default_namespace)
            _check_actor_name(doc.source, name)
            _check_namespace(doc.source, f"AsyncActor {name}", cr.metadata)
            self._once(doc, "AsyncActor", namespace, name)
            self.crs.actors.append((namespace, cr))

    def _namespace(self, metadata: dict[str, Any]) -> str:
        return str(metadata.get("namespace") or self.default_namespace)

    def _once(self, doc: Document, kind: str, namespace: str, name: str) -> str:
        key = (kind, namespace, name)
        if key in self.sources:
            where = f"{namespace}/{name}" if namespace else name
            raise CrError(
                f"{doc.source}: {kind} {where} is already defined in {self.sources[key]}: keep one"
            )
        self.sources[key] = doc.source
        self.crs.ages[key] = len(self.crs.ages)
        return name


def _check_names(crs: Crs, sources: dict[tuple[str, str, str], str]) -> None:
    # Two objects of one namespace running as one actor name: the operator keeps it for the
    # one created first (`names`), taken here as the one whose document comes first.
    by_namespace: dict[str, list[NameOwner]] = {}
    for namespace, actor in crs.actors:
        by_namespace.setdefault(namespace, []).append(actor)
    for namespace, group in crs.groups:
        by_namespace.setdefault(namespace, []).append(group)

    for namespace, owners in sorted(by_namespace.items()):

        def key(owner: NameOwner, namespace: str = namespace) -> tuple[str, str, str]:
            return (owner.kind, namespace, str(owner.metadata["name"]))

        # Applied in document order, the keeper already runs when the later one is applied.
        keepers = name_keepers(
            owners, order=lambda owner: crs.ages[key(owner)], runs=lambda _: True
        )
        for owner in sorted(owners, key=lambda owner: crs.ages[key(owner)]):
            refused = refusals(owner, namespace, keepers)
            if refused:
                keeper, first = refused[0]  # a keeper written before it
                kind, name = owner.kind, owner.metadata["name"]
                raise CrError(
                    f"{sources[key(owner)]}: {kind} {namespace}/{name} would be Degraded"
                    f" (NameTaken), applied after {sources[keeper.kind, namespace, keeper.name]}:"
                    f" {first}"
                )


def read_crs(documents: Iterable[Document], default_namespace: str) -> Crs:
    """The asya CRs among `documents` (and the Namespaces' labels), checked for what plan needs.

    Raises:
        CrError: a document is not a valid CR, a CR is defined twice, an actor names a
            flavor no document defines, or two objects of one namespace run as one actor name
            (an AsyncActor's, an ActorGroup member's `{group}-{member}`).
    """
    reader = _Reader(default_namespace)
    for doc in documents:
        reader.add(doc)
    crs = reader.crs
    for namespace, group in crs.groups:
        for member in group.spec.members:
            wanted = member.template.flavor
            if wanted is not None and wanted not in crs.flavors:
                raise CrError(
                    f"{reader.sources['ActorGroup', namespace, group.metadata['name']]}:"
                    f" ActorGroup/{group.metadata['name']} member {member.name} names flavor"
                    f" {wanted}, which no file defines: add its ResourceFlavor"
                )
    _check_names(crs, reader.sources)
    for namespace, actor in crs.actors:
        wanted = actor.spec.flavor
        if wanted is not None and wanted not in crs.flavors:
            raise CrError(
                f"{reader.sources['AsyncActor', namespace, actor_name(actor)]}: AsyncActor/"
                f"{actor_name(actor)} names flavor {wanted}, which no file defines: add its"
                " ResourceFlavor (the operator would leave the actor Degraded, FlavorNotFound)"
            )
    return crs
