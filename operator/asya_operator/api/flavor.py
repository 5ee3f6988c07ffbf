"""The ResourceFlavor custom resource: a cluster-wide kind of node, as it travels the API."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec

from asya_operator.api.template import GROUP, VERSION, Validation, doc

_Effect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Taint(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A taint the flavor's nodes carry (core Taint)."""

    key: Annotated[str, doc("Taint key.", min_length=1)]
    value: Annotated[str | None, doc("Taint value.")] = None
    effect: Annotated[_Effect, doc("NoSchedule, PreferNoSchedule or NoExecute.")]


class Toleration(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A toleration the pods of actors on this flavor get (core Toleration)."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule="has(self.key) || (has(self.operator) && self.operator == 'Exists')",
            message="a toleration without a key matches every taint: set operator: Exists, or"
            " give a key",
        ),
        Validation(
            rule="!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
            message="tolerationSeconds applies to NoExecute taints only: set effect: NoExecute or"
            " remove tolerationSeconds",
        ),
        Validation(
            rule="!(has(self.operator) && self.operator == 'Exists' && has(self.value))",
            message="a toleration with operator: Exists matches any value: remove value",
        ),
    )

    key: Annotated[str | None, doc("Taint key matched; unset = every key.")] = None
    operator: Annotated[
        Literal["Equal", "Exists"] | None, doc("Equal (the default) or Exists.")
    ] = None
    value: Annotated[str | None, doc("Taint value matched (operator Equal).")] = None
    effect: Annotated[_Effect | None, doc("Taint effect matched; unset = every effect.")] = None
    toleration_seconds: Annotated[
        int | None,
        doc("How long a NoExecute taint is tolerated before eviction, in seconds."),
    ] = None


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
