"""The CRDs of asya's custom resources, built from the typed model in `asya_operator.api.actor`.

`msgspec.json.schema` gives JSON Schema for the model; `structural_schema` turns it into what
the API server accepts (a structural OpenAPI v3 schema: every `$ref` inlined, a `type` on every
node, optional fields as plain properties, Kubernetes quantities as int-or-string, free-form
objects marked to keep their fields) and attaches each Struct's CEL rules
(`VALIDATIONS`) as `x-kubernetes-validations`.

`python -m asya_operator.api.crds [DIR]` writes one YAML file per CRD (default:
`charts/asya-operator/crds/`); a test fails when the committed files differ from these.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import msgspec
import yaml

from asya_operator.api.actor import (
    GROUP,
    VERSION,
    ActorBatch,
    ActorResources,
    ActorRetry,
    ActorScaling,
    AsyncActor,
    AsyncActorSpec,
    AsyncActorStatus,
    BrokerRef,
    Condition,
    EnvVar,
    ResourceFlavor,
    ResourceFlavorSpec,
    Taint,
    Toleration,
    Validation,
)
from asya_operator.api.group import (
    ActorGroup,
    ActorGroupSpec,
    ActorGroupStatus,
    GroupCondition,
    GroupMember,
    InstanceStatus,
    MemberAdmission,
    MemberTemplate,
    Requeuing,
)
from asya_operator.api.pool import (
    BorrowPolicyOverCohort,
    Cohort,
    CohortSpec,
    CohortStatus,
    FlavorQuotas,
    FlavorUsage,
    LabelSelectorRequirement,
    NamespaceSelector,
    PoolPreemption,
    ResourcePool,
    ResourcePoolSpec,
    ResourcePoolStatus,
    ResourceQuota,
    ResourceUsage,
)

REGENERATE: Final = ".venv/bin/python -m asya_operator.api.crds"
"""The command that rewrites the committed CRD files."""

DEFAULT_OUT: Final = Path(__file__).resolve().parents[3] / "charts" / "asya-operator" / "crds"
"""Where the CRD files live in a source checkout."""

_MODEL: Final[dict[str, type[msgspec.Struct]]] = {
    cls.__name__: cls
    for cls in (
        AsyncActor,
        AsyncActorSpec,
        AsyncActorStatus,
        ActorBatch,
        ActorResources,
        ActorRetry,
        ActorScaling,
        BrokerRef,
        Condition,
        EnvVar,
        ResourceFlavor,
        ResourceFlavorSpec,
        Taint,
        Toleration,
        ResourcePool,
        ResourcePoolSpec,
        ResourcePoolStatus,
        PoolPreemption,
        BorrowPolicyOverCohort,
        NamespaceSelector,
        LabelSelectorRequirement,
        FlavorQuotas,
        ResourceQuota,
        FlavorUsage,
        ResourceUsage,
        Cohort,
        CohortSpec,
        CohortStatus,
        ActorGroup,
        ActorGroupSpec,
        ActorGroupStatus,
        GroupMember,
        MemberTemplate,
        GroupCondition,
        InstanceStatus,
        Requeuing,
        MemberAdmission,
    )
}
_REF_PREFIX: Final = "#/$defs/"
_ROOT_FIELDS: Final = ("apiVersion", "kind", "metadata")


def validations_of(cls: type[msgspec.Struct]) -> tuple[Validation, ...]:
    """The CEL rules a model Struct declares on itself (none for most)."""
    rules: tuple[Validation, ...] = getattr(cls, "VALIDATIONS", ())
    return rules


def structural_schema(root: type[msgspec.Struct]) -> dict[str, Any]:
    """The structural openAPIV3Schema of the custom resource `root` (AsyncActor, ...)."""
    (ref,), defs = msgspec.json.schema_components([root], ref_template=_REF_PREFIX + "{name}")
    schema = _convert(ref, defs)
    # The API server owns these: typed, never defaulted; metadata is validated by the server,
    # and the CEL rules on the root may read its name.
    for name in _ROOT_FIELDS:
        schema["properties"][name] = {
            "type": schema["properties"][name]["type"],
            "description": schema["properties"][name]["description"],
        }
    return schema


def _convert(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        name = node["$ref"].removeprefix(_REF_PREFIX)
        # An enum (a closed set of strings, such as QueueingStrategy) is inlined as it is.
        inner = _convert_struct(name, defs) if name in _MODEL else _convert(defs[name], defs)
        return _merge(inner, {k: v for k, v in node.items() if k != "$ref"})
    if "anyOf" in node:
        branches = [b for b in node["anyOf"] if b.get("type") != "null"]
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        if len(branches) == 1:
            return _merge(_convert(branches[0], defs), rest)
        return _merge(_int_or_string(branches), rest)
    out = {k: v for k, v in node.items() if k != "title"}
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    if "items" in out:
        out["items"] = _convert(out["items"], defs)
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _convert(out["additionalProperties"], defs)
    if (
        out.get("type") == "object"
        and "properties" not in out
        and "additionalProperties" not in out
    ):
        out["x-kubernetes-preserve-unknown-fields"] = True
    if out.get("default") in (None, [], {}):
        out.pop("default", None)
    if "description" in out:
        out["description"] = inspect.cleandoc(out["description"])
    return out


def _convert_struct(name: str, defs: dict[str, Any]) -> dict[str, Any]:
    cls = _MODEL[name]
    component = defs[name]
    properties = {key: _convert(value, defs) for key, value in component["properties"].items()}
    for field in msgspec.structs.fields(cls):
        # A sub-object with a default of its own: `{}`, which the API server fills in from the
        # sub-object's own defaults.
        if (
            field.default_factory is not msgspec.NODEFAULT
            and properties[field.encode_name].get("type") == "object"
            and "properties" in properties[field.encode_name]
        ):
            properties[field.encode_name]["default"] = {}
    out: dict[str, Any] = {
        "type": "object",
        "description": inspect.cleandoc(component.get("description", name)),
        "properties": properties,
    }
    if component.get("required"):
        out["required"] = component["required"]
    rules = validations_of(cls)
    if rules:
        out["x-kubernetes-validations"] = [msgspec.to_builtins(rule) for rule in rules]
    return out


def _int_or_string(branches: list[dict[str, Any]]) -> dict[str, Any]:
    # A Kubernetes quantity: `2` or "500m". The structural form puts the pattern outside anyOf.
    types = sorted(b.get("type", "") for b in branches)
    if types != ["integer", "string"]:
        raise TypeError(f"no structural form for a union of {types}")
    out: dict[str, Any] = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    }
    for branch in branches:
        if "pattern" in branch:
            out["pattern"] = branch["pattern"]
    return out


def _merge(inner: dict[str, Any], outer: dict[str, Any]) -> dict[str, Any]:
    # Keys given where a type is used (description, default) win over the type's own.
    merged = {**inner, **outer}
    if merged.get("default") in (None, []) or (
        merged.get("default") == {} and "properties" not in merged
    ):
        merged.pop("default", None)
    if "description" in merged:
        merged["description"] = inspect.cleandoc(merged["description"])
    return merged


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


def async_actor_crd() -> dict[str, Any]:
    """The AsyncActor CRD: namespaced, with `status` and `scale` subresources."""
    return _crd(
        AsyncActor,
        plural="asyncactors",
        scope="Namespaced",
        short_names=["aa"],
        subresources=_STATUS_AND_SCALE,
        printer_columns=[
            _column("Desired", "integer", ".spec.replicas", "Replicas KEDA asks for"),
            _column(
                "Admitted",
                "integer",
                ".status.admittedReplicas",
                "Replicas the pool's quota admits",
            ),
            _column("Ready", "integer", ".status.readyReplicas", "Replicas ready"),
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
            _column("Pool", "string", ".spec.pool", "ResourcePool"),
            _column("Priority", "integer", ".spec.priority", "Admission priority"),
            _column("Desired", "integer", ".spec.replicas", "Gang instances asked for"),
            _column("Admitted", "integer", ".status.admitted", "Instances holding quota"),
            _column("Ready", "integer", ".status.ready", "Instances fully ready"),
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
    module = _MODEL[crd["spec"]["names"]["kind"]].__module__.replace(".", "/")
    header = (
        f"# Generated from operator/{module}.py; do not edit by hand.\n# Regenerate: {REGENERATE}\n"
    )
    body = yaml.safe_dump(crd, sort_keys=False, default_flow_style=False, width=100)
    return header + body


def crd_files() -> dict[str, str]:
    """File name -> contents, for every CRD."""
    return {file_name(crd): render(crd) for crd in all_crds()}


def main(argv: Sequence[str] | None = None) -> int:
    """Write every CRD as YAML into a directory."""
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
