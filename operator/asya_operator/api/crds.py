"""The CRDs of asya's custom resources, built from the typed model in `asya_operator.api.actor`.

`msgspec.json.schema` gives JSON Schema for the model; `structural_schema` turns it into what
the API server accepts (a structural OpenAPI v3 schema: every `$ref` inlined, a `type` on every
node, optional fields as plain properties, Kubernetes quantities as int-or-string, free-form
objects marked to keep their fields) and attaches each Struct's CEL rules
(`VALIDATIONS`) as `x-kubernetes-validations`.

`python -m asya_operator.api.crds [DIR]` writes one YAML file per CRD (default:
`charts/asya-operator/crds/`), and the AsyncActor's schema into the asya package
(`asya/schemas/asyncactor.json`), where `asya render` checks what it writes with the same
rules; a test fails when the committed files differ from these.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import msgspec
import yaml

from asya_operator.api.actor import AsyncActor
from asya_operator.api.flavor import ResourceFlavor
from asya_operator.api.group import (
    ActorGroup,
)
from asya_operator.api.pool import (
    Cohort,
    ResourcePool,
)
from asya_operator.api.schema import structural_schema
from asya_operator.api.template import (
    GROUP,
    VERSION,
)

REGENERATE: Final = ".venv/bin/python -m asya_operator.api.crds"
"""The command that rewrites the committed CRD files."""

DEFAULT_OUT: Final = Path(__file__).resolve().parents[3] / "charts" / "asya-operator" / "crds"
"""Where the CRD files live in a source checkout."""

PACKAGED_SCHEMA: Final = (
    Path(__file__).resolve().parents[3] / "asya" / "schemas" / "asyncactor.json"
)
"""The AsyncActor's openAPIV3Schema in the asya package, for `asya render` (which never imports
the operator)."""


_KINDS: Final[dict[str, type[msgspec.Struct]]] = {
    kind.__name__: kind for kind in (AsyncActor, ResourceFlavor, ResourcePool, Cohort, ActorGroup)
}


def _crd(
    root: type[msgspec.Struct],
    *,
    plural: str,
    scope: str,
    short_names: Sequence[str] = (),
    subresources: dict[str, Any] | None = None,
    printer_columns: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    kind = root.__name__
    names: dict[str, Any] = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
        "categories": ["asya"],
    }
    if short_names:
        names["shortNames"] = list(short_names)
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": structural_schema(root)},
    }
    # Copies: the shared pieces (_STATUS_AND_SCALE, _AGE) stay as they are whatever a caller
    # does with the CRD it gets.
    if subresources:
        version["subresources"] = copy.deepcopy(subresources)
    if printer_columns:
        version["additionalPrinterColumns"] = [dict(column) for column in printer_columns]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {"group": GROUP, "names": names, "scope": scope, "versions": [version]},
    }


def _column(
    name: str, type_: str, path: str, description: str, priority: int = 0
) -> dict[str, Any]:
    column: dict[str, Any] = {
        "name": name,
        "type": type_,
        "jsonPath": path,
        "description": description,
    }
    if priority:
        column["priority"] = priority
    return column


_STATUS_AND_SCALE: Final = {
    "status": {},
    # KEDA (through its HPA) scales the resource by `spec.replicas`.
    "scale": {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    },
}
_AGE: Final = _column("Age", "date", ".metadata.creationTimestamp", "Time since creation")


def _condition(type_: str, field: str) -> str:
    """The JSONPath of a field of the condition of `type_` (empty where there is none yet)."""
    return f'.status.conditions[?(@.type=="{type_}")].{field}'


_READY: Final = _column("Ready", "string", _condition("Ready", "status"), "Ready condition")
_REASON: Final = _column("Reason", "string", _condition("Ready", "reason"), "Why (Ready's reason)")
_DEGRADED: Final = _column(
    "Degraded", "string", _condition("Degraded", "status"), "Something it needs is missing", 1
)


def async_actor_crd() -> dict[str, Any]:
    """The AsyncActor CRD: namespaced, with `status` and `scale` subresources."""
    return _crd(
        AsyncActor,
        plural="asyncactors",
        scope="Namespaced",
        short_names=["aa"],
        subresources=_STATUS_AND_SCALE,
        printer_columns=[
            _READY,
            _REASON,
            _column("Desired", "integer", ".spec.replicas", "Replicas KEDA asks for"),
            _column(
                "Admitted",
                "integer",
                ".status.admittedReplicas",
                "Replicas the pool's quota admits",
            ),
            _column("Ready Replicas", "integer", ".status.readyReplicas", "Replicas ready"),
            _DEGRADED,
            _column("Pool", "string", ".spec.pool", "ResourcePool", priority=1),
            _column("Image", "string", ".spec.image", "Container image"),
            _column("Handler", "string", ".spec.handler", "module:attr", priority=1),
            _column("Flavor", "string", ".spec.flavor", "ResourceFlavor", priority=1),
            _AGE,
        ],
    )


def resource_flavor_crd() -> dict[str, Any]:
    """The ResourceFlavor CRD: cluster-scoped, as in Kueue."""
    return _crd(
        ResourceFlavor,
        plural="resourceflavors",
        scope="Cluster",
        # Not Kueue's (flavor, flavors, rf): both kinds may be installed side by side.
        short_names=["arf"],
        printer_columns=[
            _AGE,
        ],
    )


def resource_pool_crd() -> dict[str, Any]:
    """The ResourcePool CRD: cluster-scoped, as Kueue's ClusterQueue, with `status`."""
    return _crd(
        ResourcePool,
        plural="resourcepools",
        scope="Cluster",
        short_names=["pool"],
        subresources={"status": {}},
        printer_columns=[
            _column("Active", "string", _condition("Active", "status"), "Active condition"),
            _column("Reason", "string", _condition("Active", "reason"), "Why (Active's reason)"),
            _column("Cohort", "string", ".spec.cohort", "Cohort it shares quota in"),
            _column("Strategy", "string", ".spec.queueingStrategy", "Queueing", priority=1),
            _column("Admitted", "integer", ".status.admittedWorkloads", "Workloads holding quota"),
            _column("Pending", "integer", ".status.pendingWorkloads", "Workloads waiting"),
            _AGE,
        ],
    )


def cohort_crd() -> dict[str, Any]:
    """The Cohort CRD: cluster-scoped, with `status`."""
    return _crd(
        Cohort,
        plural="cohorts",
        scope="Cluster",
        # Not Kueue's (co): both kinds may be installed side by side.
        short_names=["acoh"],
        subresources={"status": {}},
        printer_columns=[
            _column("Parent", "string", ".spec.parent", "Parent cohort"),
            _AGE,
        ],
    )


def actor_group_crd() -> dict[str, Any]:
    """The ActorGroup CRD: namespaced, with `status` and `scale` (gang instances) subresources."""
    return _crd(
        ActorGroup,
        plural="actorgroups",
        scope="Namespaced",
        short_names=["ag"],
        subresources=_STATUS_AND_SCALE,
        printer_columns=[
            _READY,
            _REASON,
            _column("Pool", "string", ".spec.pool", "ResourcePool"),
            _column("Priority", "integer", ".spec.priority", "Admission priority"),
            _column("Desired", "integer", ".spec.replicas", "Gang instances asked for"),
            _column("Admitted", "integer", ".status.admitted", "Instances holding quota"),
            _column("Ready Instances", "integer", ".status.ready", "Instances fully ready"),
            _DEGRADED,
            _AGE,
        ],
    )


def all_crds() -> list[dict[str, Any]]:
    """Every CRD asya installs."""
    return [
        async_actor_crd(),
        resource_flavor_crd(),
        resource_pool_crd(),
        cohort_crd(),
        actor_group_crd(),
    ]


def file_name(crd: dict[str, Any]) -> str:
    """`asya.sh_asyncactors.yaml`: group and plural, as controller-gen names them."""
    return f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml"


def render(crd: dict[str, Any]) -> str:
    """The CRD as the YAML file it is committed as, with a do-not-edit header."""
    module = _KINDS[crd["spec"]["names"]["kind"]].__module__.replace(".", "/")
    header = (
        f"# Generated from operator/{module}.py; do not edit by hand.\n# Regenerate: {REGENERATE}\n"
    )
    body = yaml.safe_dump(crd, sort_keys=False, default_flow_style=False, width=100)
    return header + body


def crd_files() -> dict[str, str]:
    """File name -> contents, for every CRD."""
    return {file_name(crd): render(crd) for crd in all_crds()}


def packaged_schema() -> str:
    """The AsyncActor CRD's openAPIV3Schema as `asya render` reads it (JSON)."""
    (version,) = async_actor_crd()["spec"]["versions"]
    return json.dumps(version["schema"]["openAPIV3Schema"], indent=1, sort_keys=True) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write every CRD as YAML into a directory, and the AsyncActor's schema into the asya
    package."""
    parser = argparse.ArgumentParser(
        prog="python -m asya_operator.api.crds", description=main.__doc__
    )
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT, help="directory")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for name, text in crd_files().items():
        (out / name).write_text(text, encoding="utf-8")
        print(out / name)
    if out == DEFAULT_OUT:  # a source checkout: the package's copy too
        PACKAGED_SCHEMA.parent.mkdir(exist_ok=True)
        PACKAGED_SCHEMA.write_text(packaged_schema(), encoding="utf-8")
        print(PACKAGED_SCHEMA)
    return 0


if __name__ == "__main__":
    sys.exit(main())
