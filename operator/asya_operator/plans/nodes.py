"""The cluster's Nodes as placement reads them, and which accelerators a flavor's nodes lack.

Pure: Node bodies as the API returns them in, a `Node` each; a flavor, the Nodes and what a pod
asks for in, a `Shortage` (or None) out. A node can be Ready while it advertises no allocatable
GPUs (its device plugin not running, a driver that failed to load): its pods then wait
unschedulable, and nothing in the pool's quota says why. The admission pass names it in the
status of an admitted actor or gang instance whose pods are not ready yet (`actor_status`,
`group_status`); admission itself never reads Nodes (quota stays quota).

A flavor's nodes are those carrying all its `nodeLabels` (every node, for a flavor with none)
that are Ready and not cordoned: a pod of the flavor can land on no other. An accelerator is an
extended resource (`asya.admission.accelerators.is_accelerator`, as admission tells them apart):
only those the pod asks for are judged, and one counts as advertised when some of the flavor's
nodes has more than zero of it allocatable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from asya.admission.accelerators import is_accelerator
from asya.admission.quantity import parse_quantity
from asya.errors import AdmissionError
from asya_operator.api.flavor import ResourceFlavor


@dataclasses.dataclass(frozen=True)
class Node:
    """One Node, as far as placement reads it."""

    name: str
    labels: Mapping[str, str]
    ready: bool
    """Its `Ready` condition is True."""
    unschedulable: bool
    """`spec.unschedulable`: cordoned."""
    allocatable: Mapping[str, str]
    """`status.allocatable`: quantities by resource name."""

    @property
    def takes_pods(self) -> bool:
        """Ready and not cordoned: new pods may be scheduled on it."""
        return self.ready and not self.unschedulable


def node_of(body: Mapping[str, Any]) -> Node:
    """A Node as the API returns it (a dict), as placement reads it."""
    meta, spec, status = (
        body.get("metadata") or {},
        body.get("spec") or {},
        body.get("status") or {},
    )
    conditions = status.get("conditions") or ()
    return Node(
        name=str(meta.get("name", "")),
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
        unschedulable=bool(spec.get("unschedulable")),
        allocatable={str(k): str(v) for k, v in (status.get("allocatable") or {}).items()},
    )


@dataclasses.dataclass(frozen=True)
class Shortage:
    """Accelerators a pod asks for that none of its flavor's nodes advertises."""

    flavor: str
    resources: tuple[str, ...]
    """The accelerators lacking, sorted (`nvidia.com/gpu`)."""
    nodes: int
    """The flavor's nodes: Ready and not cordoned, with its labels."""
    elsewhere: int
    """Nodes with its labels that are not Ready, or cordoned."""
    labels: Mapping[str, str]
    """The flavor's node labels."""

    @property
    def message(self) -> str:
        """For a person: "ResourceFlavor h100: its 2 Ready nodes advertise no allocatable
        nvidia.com/gpu (is the device plugin running?)"."""
        lacking = ", ".join(self.resources)
        if self.nodes:
            counted = (
                "1 Ready node advertises"
                if self.nodes == 1
                else f"{self.nodes} Ready nodes advertise"
            )
            return (
                f"ResourceFlavor {self.flavor}: its {counted} no allocatable {lacking}"
                " (is the device plugin running?)"
            )
        labels = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        which = f"with labels {labels}" if labels else "at all"
        others = ""
        if self.elsewhere:
            others = f"; {self.elsewhere} with its labels not Ready or cordoned"
        return (
            f"ResourceFlavor {self.flavor}: no Ready, schedulable node {which}{others}, so no"
            f" {lacking} to run on (a cluster autoscaler may be adding one)"
        )


def lacking_accelerators(
    flavor: ResourceFlavor, nodes: Sequence[Node], requests: Mapping[str, int]
) -> Shortage | None:
    """The accelerators of `requests` (what one pod asks for, by resource name: more than
    zero counts) that none of `flavor`'s nodes advertises (see the module docstring); None when
    each is advertised, or the pod asks for none.

    An empty `nodes` says nothing of any flavor: a cluster without a single node runs no pod at
    all, the operator's own included, so no flavor in particular is at fault there.
    """
    asked = sorted(r for r, amount in requests.items() if amount > 0 and is_accelerator(r))
    if not asked or not nodes:
        return None
    wanted = flavor.spec.node_labels or {}
    labelled = [n for n in nodes if all(n.labels.get(k) == v for k, v in wanted.items())]
    usable = [n for n in labelled if n.takes_pods]
    lacking = tuple(r for r in asked if not any(_allocatable(n, r) > 0 for n in usable))
    if not lacking:
        return None
    return Shortage(
        flavor=str(flavor.metadata.get("name", "")),
        resources=lacking,
        nodes=len(usable),
        elsewhere=len(labelled) - len(usable),
        labels=dict(wanted),
    )


def _allocatable(node: Node, resource: str) -> int:
    try:
        return parse_quantity(node.allocatable.get(resource, "0"))
    except AdmissionError:  # a value the node should never show: as if it showed none
        return 0
