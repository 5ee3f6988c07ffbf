"""The ResourceFlavor custom resource: a cluster-wide kind of node, as it travels the API."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from asya_operator.api.template import GROUP, VERSION, TaintEffect, Toleration, doc


class Taint(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A taint the flavor's nodes carry (core Taint)."""

    key: Annotated[str, doc("Taint key.", min_length=1)]
    value: Annotated[str | None, doc("Taint value.")] = None
    effect: Annotated[TaintEffect, doc("NoSchedule, PreferNoSchedule or NoExecute.")]


class ResourceFlavorSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A kind of node (as in Kueue): which labels select it, which taints it has."""

    node_labels: Annotated[
        Annotated[dict[str, str], msgspec.Meta(max_length=8)] | None,
        doc("Labels the pods' nodeSelector requires."),
    ] = None
    node_taints: Annotated[
        Annotated[list[Taint], msgspec.Meta(max_length=8)] | None,
        doc("Taints the flavor's nodes carry; pods get matching tolerations."),
    ] = None
    tolerations: Annotated[
        Annotated[list[Toleration], msgspec.Meta(max_length=8)] | None,
        doc("Extra tolerations the pods get."),
    ] = None


class ResourceFlavor(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A cluster-wide kind of node actors can be placed on (node labels and tolerations)."""

    api_version: Annotated[str, doc("asya.sh/v1alpha1")] = f"{GROUP}/{VERSION}"
    kind: Annotated[str, doc("ResourceFlavor")] = "ResourceFlavor"
    metadata: Annotated[dict[str, Any], doc("Standard object metadata.")] = msgspec.field(
        default_factory=dict
    )
    spec: Annotated[ResourceFlavorSpec, doc("Node labels, taints and tolerations.")]
