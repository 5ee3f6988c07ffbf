"""Small valid admission CRs (ResourcePool, Cohort, ActorGroup) that tests change one field of."""

from __future__ import annotations

import copy
from typing import Any

POOL: dict[str, Any] = {
    "apiVersion": "asya.sh/v1alpha1",
    "kind": "ResourcePool",
    "metadata": {"name": "team-a"},
    "spec": {
        "cohort": "eng",
        "quotas": [
            {
                "flavor": "h100",
                "resources": [
                    {"name": "nvidia.com/gpu", "nominal": 8, "lendingLimit": 2},
                    {"name": "cpu", "nominal": "64"},
                ],
            }
        ],
    },
}
COHORT: dict[str, Any] = {
    "apiVersion": "asya.sh/v1alpha1",
    "kind": "Cohort",
    "metadata": {"name": "eng"},
    "spec": {"parent": "company"},
}
GROUP: dict[str, Any] = {
    "apiVersion": "asya.sh/v1alpha1",
    "kind": "ActorGroup",
    "metadata": {"name": "ddp", "namespace": "ml-b"},
    "spec": {
        "pool": "team-b",
        "members": [
            {
                "name": "worker",
                "replicas": 4,
                "template": {
                    "image": "registry.example.com/ml/ddp:1",
                    "handler": "ml.ddp:worker",
                    "resources": {"gpus": 1, "cpu": "8"},
                },
            }
        ],
    },
}


def changed(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """`base` with dotted paths set (`spec.cohort` as `spec__cohort`); None removes the key."""
    obj = copy.deepcopy(base)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = obj
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return obj


def member(**fields: Any) -> dict[str, Any]:
    """The GROUP's member with some fields replaced."""
    return {**GROUP["spec"]["members"][0], **fields}
