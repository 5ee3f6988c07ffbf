"""Core Kubernetes types an actor's template passes to its pods: affinity and the common volume
sources, typed field for field as the core API has them.

Typed, a misspelt field (`nodeAffinty`, `emptyDir: {medum: Memory}`) is refused where the API
server refuses one in a Pod: by the CRD's structural schema when the AsyncActor or ActorGroup
is applied, and by `asya-operator plan`, which checks the same schema offline. Free-form, it
was taken, stored and found only when the operator's Deployment was refused. Field names,
enums and bounds follow core v1 (Affinity, VolumeSource); a volume source not typed here
(a cloud disk, nfs, csi, projected, ...) stays free-form in `template.Volume`, checked by the
API server with the pod.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec

QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
"""A Kubernetes resource quantity (`500m`, `2`, `16Gi`), as the core API's own schema has it."""


def _doc(text: str, **constraints: Any) -> msgspec.Meta:
    return msgspec.Meta(description=text, **constraints)


_Core = {"frozen": True, "kw_only": True, "rename": "camel", "omit_defaults": True}
"""How every type here is declared: camelCase on the wire, unset fields left out."""

_Weight = Annotated[int, _doc("Weight, 1 to 100: higher is preferred more.", ge=1, le=100)]
# No bound on these lists: core has none (a node affinity may list hundreds of hosts), and no
# CEL rule walks them.
_Strings = list[str]


class NodeSelectorRequirement(msgspec.Struct, **_Core):
    """A node label (or field) requirement (core NodeSelectorRequirement)."""

    key: Annotated[str, _doc("The label key (or field name) the requirement is on.", min_length=1)]
    operator: Annotated[
        Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"],
        _doc("How the key's value relates to `values`."),
    ]
    values: Annotated[
        _Strings | None, _doc("Values: several for In/NotIn, one for Gt/Lt, none for Exists.")
    ] = None


class NodeSelectorTerm(msgspec.Struct, **_Core):
    """Node requirements that must all hold (core NodeSelectorTerm)."""

    match_expressions: Annotated[
        list[NodeSelectorRequirement] | None, _doc("Requirements on node labels.")
    ] = None
    match_fields: Annotated[
        list[NodeSelectorRequirement] | None, _doc("Requirements on node fields.")
    ] = None


class NodeSelector(msgspec.Struct, **_Core):
    """Terms any one of which a node must meet (core NodeSelector)."""

    node_selector_terms: Annotated[list[NodeSelectorTerm], _doc("The terms, ORed.", min_length=1)]


class PreferredSchedulingTerm(msgspec.Struct, **_Core):
    """A weighted node preference (core PreferredSchedulingTerm)."""

    weight: _Weight
    preference: Annotated[NodeSelectorTerm, _doc("The node requirements preferred.")]


class NodeAffinity(msgspec.Struct, **_Core):
    """Which nodes the pods may, and would rather, run on (core NodeAffinity)."""

    required_during_scheduling_ignored_during_execution: Annotated[
        NodeSelector | None, _doc("Nodes the pods must run on.")
    ] = None
    preferred_during_scheduling_ignored_during_execution: Annotated[
        list[PreferredSchedulingTerm] | None, _doc("Nodes the pods would rather run on.")
    ] = None


class LabelSelectorRequirement(msgspec.Struct, **_Core):
    """A label requirement (core LabelSelectorRequirement)."""

    key: Annotated[str, _doc("The label key.", min_length=1)]
    operator: Annotated[
        Literal["In", "NotIn", "Exists", "DoesNotExist"],
        _doc("How the label's value relates to `values`."),
    ]
    values: Annotated[_Strings | None, _doc("Values, for In and NotIn.")] = None


class LabelSelector(msgspec.Struct, **_Core):
    """A label query (core LabelSelector): every requirement holds."""

    match_labels: Annotated[dict[str, str] | None, _doc("Labels that must equal these.")] = None
    match_expressions: Annotated[
        list[LabelSelectorRequirement] | None, _doc("More requirements on labels.")
    ] = None


class PodAffinityTerm(msgspec.Struct, **_Core):
    """Pods that must (or must not) share a topology domain with these (core PodAffinityTerm)."""

    topology_key: Annotated[
        str, _doc("The node label whose value is the domain (a zone, a host).", min_length=1)
    ]
    label_selector: Annotated[LabelSelector | None, _doc("The pods this term is about.")] = None
    namespace_selector: Annotated[
        LabelSelector | None, _doc("Namespaces those pods are looked for in.")
    ] = None
    namespaces: Annotated[_Strings | None, _doc("Namespaces, by name.")] = None
    match_label_keys: Annotated[
        _Strings | None, _doc("Label keys whose values the pods must share with the new one.")
    ] = None
    mismatch_label_keys: Annotated[
        _Strings | None, _doc("Label keys whose values the pods must not share with it.")
    ] = None


class WeightedPodAffinityTerm(msgspec.Struct, **_Core):
    """A weighted pod (anti-)affinity preference (core WeightedPodAffinityTerm)."""

    weight: _Weight
    pod_affinity_term: Annotated[PodAffinityTerm, _doc("The term preferred.")]


class PodAffinity(msgspec.Struct, **_Core):
    """Pods to run beside (core PodAffinity; PodAntiAffinity has the same fields)."""

    required_during_scheduling_ignored_during_execution: Annotated[
        list[PodAffinityTerm] | None, _doc("Terms that must hold.")
    ] = None
    preferred_during_scheduling_ignored_during_execution: Annotated[
        list[WeightedPodAffinityTerm] | None, _doc("Terms preferred.")
    ] = None


class Affinity(msgspec.Struct, **_Core):
    """The pods' affinity (core Affinity)."""

    node_affinity: Annotated[NodeAffinity | None, _doc("Which nodes.")] = None
    pod_affinity: Annotated[PodAffinity | None, _doc("Beside which pods.")] = None
    pod_anti_affinity: Annotated[PodAffinity | None, _doc("Away from which pods.")] = None


_Mode = Annotated[int, _doc("File mode bits (0 to 0777).", ge=0, le=0o777)]


class KeyToPath(msgspec.Struct, **_Core):
    """One key of a ConfigMap or Secret as a file (core KeyToPath)."""

    key: Annotated[str, _doc("The key.", min_length=1)]
    path: Annotated[str, _doc("The file's relative path.", min_length=1)]
    mode: _Mode | None = None


class EmptyDirVolumeSource(msgspec.Struct, **_Core):
    """A directory that lives as long as the pod (core EmptyDirVolumeSource)."""

    medium: Annotated[
        Annotated[str, msgspec.Meta(pattern=r"^(|Memory|HugePages(-.+)?)$")] | None,
        _doc(
            "Memory: a tmpfs (the /dev/shm recipe); HugePages or HugePages-<size>: huge pages;"
            " unset or '': the node's disk."
        ),
    ] = None
    size_limit: Annotated[
        Annotated[str, msgspec.Meta(pattern=QUANTITY_PATTERN)] | int | None,
        _doc("Largest size, as a quantity (`1Gi`)."),
    ] = None


class ConfigMapVolumeSource(msgspec.Struct, **_Core):
    """A ConfigMap's keys as files (core ConfigMapVolumeSource)."""

    name: Annotated[str, _doc("The ConfigMap.", min_length=1)]
    items: Annotated[list[KeyToPath] | None, _doc("Keys to project; unset = every key.")] = None
    default_mode: _Mode | None = None
    optional: Annotated[bool | None, _doc("Whether the ConfigMap may be missing.")] = None


class SecretVolumeSource(msgspec.Struct, **_Core):
    """A Secret's keys as files (core SecretVolumeSource)."""

    secret_name: Annotated[str, _doc("The Secret.", min_length=1)]
    items: Annotated[list[KeyToPath] | None, _doc("Keys to project; unset = every key.")] = None
    default_mode: _Mode | None = None
    optional: Annotated[bool | None, _doc("Whether the Secret may be missing.")] = None


class PersistentVolumeClaimVolumeSource(msgspec.Struct, **_Core):
    """A PersistentVolumeClaim's volume (core PersistentVolumeClaimVolumeSource)."""

    claim_name: Annotated[str, _doc("The claim, in the pod's namespace.", min_length=1)]
    read_only: Annotated[bool | None, _doc("Mount it read-only.")] = None


class HostPathVolumeSource(msgspec.Struct, **_Core):
    """A path on the node (core HostPathVolumeSource)."""

    path: Annotated[str, _doc("The path on the node.", min_length=1)]
    type: Annotated[
        Literal[
            "",
            "DirectoryOrCreate",
            "Directory",
            "FileOrCreate",
            "File",
            "Socket",
            "CharDevice",
            "BlockDevice",
        ]
        | None,
        _doc("What must be there; unset or '': no check."),
    ] = None
