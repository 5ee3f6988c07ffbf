"""The charts' `values.schema.json`, built from the same model as the CRDs and the config.

Helm checks values against a chart's `values.schema.json` before it renders anything, so a
misspelt actor field or a negative replica count fails `helm install` with the field's path
instead of reaching the cluster. The schemas are not written by hand:
- `asya-pipeline`: each entry of `actors` (and `actorDefaults`) is the AsyncActor CRD's
  `spec` schema, each entry of `actorGroups` the ActorGroup's, made strict (an unknown key is
  an error; the API server would silently prune it) and with the CRD's descriptions; the
  operator's volume names, mount paths and pod label and annotation keys, which the CRDs
  refuse by CEL rules, are refused by the schema too.
- `asya-platform`: each entry of `flavors`, `resourcePools` and `cohorts` is the
  ResourceFlavor's, ResourcePool's or Cohort's `spec` schema, made strict the same way.
- `asya-operator`: `config` has one key per `OperatorConfig` field, typed from it, and the
  chart's `values.yaml` carries the same defaults (a test holds them equal).

`python -m asya_operator.api.chart_schema` writes the three files; a test fails when the
committed files differ from these.
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

from asya.envelope import ACTOR_NAME_MAX_LENGTH, ACTOR_NAME_PATTERN
from asya_operator.api.crds import all_crds
from asya_operator.api.template import (
    DNS_SUBDOMAIN_PATTERN,
    LABEL_VALUE_PATTERN,
    OPERATOR_ANNOTATIONS,
    OPERATOR_LABELS,
    OPERATOR_MOUNT_PATHS,
    OPERATOR_VOLUMES,
)
from asya_operator.config import OperatorConfig

REGENERATE: Final = ".venv/bin/python -m asya_operator.api.chart_schema"
"""The command that rewrites the committed schema files."""

CHARTS: Final = Path(__file__).resolve().parents[3] / "charts"
"""The charts' folder in a source checkout."""

_DRAFT: Final = "http://json-schema.org/draft-07/schema#"
_LABEL: Final = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_DNS_LABEL: Final = f"^{_LABEL}$"
_DNS_LABEL_OR_EMPTY: Final = f"^({_LABEL})?$"
OPERATOR_CONFIG_OWN_VALUES: Final = frozenset({"sidecar_image", "port"})
"""OperatorConfig fields the operator chart sets from values of their own (`sidecar.image`
and `port`), not from `config`."""


def _spec_schema(kind: str) -> dict[str, Any]:
    (crd,) = [crd for crd in all_crds() if crd["spec"]["names"]["kind"] == kind]
    (version,) = crd["spec"]["versions"]
    return copy.deepcopy(version["schema"]["openAPIV3Schema"]["properties"]["spec"])


def strict(node: dict[str, Any]) -> dict[str, Any]:
    """A CRD schema node as plain JSON Schema for values: Kubernetes' extensions dropped
    (their CEL rules cannot run in Helm), and every object with declared properties closed,
    so a misspelt key is an error. Objects the CRD keeps free-form stay free-form."""
    out = {k: v for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if "properties" in out:
        out["properties"] = {name: strict(sub) for name, sub in out["properties"].items()}
        out["additionalProperties"] = False
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = strict(out["additionalProperties"])
    if "items" in out:
        out["items"] = strict(out["items"])
    return out


def _not_one_of(names: Sequence[str]) -> dict[str, Any]:
    return {"not": {"enum": list(names)}}


def refuse_reserved(template: dict[str, Any]) -> dict[str, Any]:
    """An actor template's schema, refusing what the CRD's CEL rules refuse (and Helm cannot
    run): the operator's volume names, mount paths, pod label and annotation keys, and a pod
    label's malformed value."""
    properties = template["properties"]
    properties["volumes"]["items"]["properties"]["name"] |= _not_one_of(OPERATOR_VOLUMES)
    properties["volumeMounts"]["items"]["properties"]["mountPath"] |= _not_one_of(
        OPERATOR_MOUNT_PATHS
    )
    properties["podLabels"]["propertyNames"] = _not_one_of(OPERATOR_LABELS)
    properties["podLabels"]["additionalProperties"]["pattern"] = LABEL_VALUE_PATTERN
    properties["podAnnotations"]["propertyNames"] = _not_one_of(OPERATOR_ANNOTATIONS)
    return template


def actor_entry_schema(*, handler_required: bool) -> dict[str, Any]:
    """An entry of `actors`: the AsyncActor spec less `replicas` (KEDA's, through the scale
    subresource); `image` may come from the chart-wide `image`."""
    spec = refuse_reserved(strict(_spec_schema("AsyncActor")))
    del spec["properties"]["replicas"]
    spec["required"] = ["handler"] if handler_required else []
    if not spec["required"]:
        del spec["required"]
    return spec


def actor_group_schema() -> dict[str, Any]:
    """An entry of `actorGroups`: the ActorGroup spec less `replicas` (KEDA's, through the
    scale subresource); a member template's `image` may come from the chart-wide `image`."""
    spec = strict(_spec_schema("ActorGroup"))
    del spec["properties"]["replicas"]
    template = refuse_reserved(spec["properties"]["members"]["items"]["properties"]["template"])
    template["required"] = [name for name in template["required"] if name != "image"]
    return spec


def _named(kind: str, description: str, names: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "propertyNames": names,
        "additionalProperties": strict(_spec_schema(kind)),
    }


_OBJECT_NAME: Final = {"pattern": DNS_SUBDOMAIN_PATTERN, "maxLength": 253}

CLUSTER_SCOPED_VALUES: Final = {
    "flavors": ("ResourceFlavor", "ResourceFlavors to create, by name (cluster-scoped)."),
    "resourcePools": ("ResourcePool", "ResourcePools to create, by name (cluster-scoped)."),
    "cohorts": ("Cohort", "Cohorts to create, by name (cluster-scoped)."),
}
"""The asya-platform chart's values of cluster-scoped objects: key -> (kind, description)."""

_COMMON_LABELS: Final = {
    "type": "object",
    "description": "Labels added to every object the chart creates.",
    "additionalProperties": {"type": "string"},
}


def pipeline_values_schema() -> dict[str, Any]:
    """`charts/asya-pipeline/values.schema.json`."""
    return {
        "$schema": _DRAFT,
        "title": "Values of the asya-pipeline chart",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "global": {"type": "object", "description": "Helm's values shared with subcharts."},
            "image": {
                "type": "string",
                "description": "Image of every actor that does not name its own.",
            },
            "namespace": {
                "type": "string",
                "pattern": _DNS_LABEL_OR_EMPTY,
                "description": "Namespace of the AsyncActors; empty = the release's.",
            },
            "broker": _broker_schema(),
            "actorDefaults": {
                **actor_entry_schema(handler_required=False),
                "description": "Fields merged under every actor's own (the actor's value wins).",
            },
            "actors": {
                "type": "object",
                "description": "The actors by name; each entry holds AsyncActor spec fields.",
                "propertyNames": {
                    "pattern": ACTOR_NAME_PATTERN,
                    "maxLength": ACTOR_NAME_MAX_LENGTH,
                },
                "additionalProperties": actor_entry_schema(handler_required=True),
            },
            "actorGroups": {
                "type": "object",
                "description": "ActorGroups (gangs of actors admitted together), by name;"
                " each entry holds ActorGroup spec fields.",
                "propertyNames": {
                    "pattern": ACTOR_NAME_PATTERN,
                    "maxLength": ACTOR_NAME_MAX_LENGTH,
                },
                "additionalProperties": actor_group_schema(),
            },
            # Accepted as any object only for the chart's template to refuse them with where
            # they went (asya-platform): a schema without them, or checking their entries,
            # would answer first, with a message that does not say so.
            **{
                key: {
                    "type": "object",
                    "description": f"Refused: {kind}s are cluster-scoped, shared by teams;"
                    " set them in the asya-platform chart's values.",
                }
                for key, (kind, _description) in CLUSTER_SCOPED_VALUES.items()
            },
            "commonLabels": _COMMON_LABELS,
        },
    }


def platform_values_schema() -> dict[str, Any]:
    """`charts/asya-platform/values.schema.json`."""
    return {
        "$schema": _DRAFT,
        "title": "Values of the asya-platform chart",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "global": {"type": "object", "description": "Helm's values shared with subcharts."},
            **{
                key: _named(kind, description, _OBJECT_NAME)
                for key, (kind, description) in CLUSTER_SCOPED_VALUES.items()
            },
            "commonLabels": _COMMON_LABELS,
        },
    }


def _broker_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "description": "The Secret with the broker's URLs (keys amqp-url and management-url).",
        "properties": {
            "secretName": {
                "type": "string",
                "pattern": DNS_SUBDOMAIN_PATTERN,
                "maxLength": 253,
                "description": "Name of the Secret every actor uses unless it names its own.",
            },
            "create": {
                "type": "boolean",
                "description": "Create the Secret from amqpUrl and managementUrl.",
            },
            "amqpUrl": {
                "type": "string",
                "description": "amqp://user:password@host:5672/vhost (when create is true).",
            },
            "managementUrl": {
                "type": "string",
                "description": "http://user:password@host:15672 (when create is true).",
            },
        },
        "required": ["secretName"],
    }


def config_key(field_name: str) -> str:
    """The operator chart's `config` key of an OperatorConfig field: `grace_s` -> `graceS`."""
    head, *rest = field_name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def operator_config_schema() -> dict[str, Any]:
    """The `config` object of the operator chart: one key per OperatorConfig field, typed from
    it (each becomes the variable ASYA_OPERATOR_{FIELD} of the operator's container)."""
    (ref,), defs = msgspec.json.schema_components([OperatorConfig])
    component = defs[ref["$ref"].rsplit("/", 1)[-1]]
    properties = {}
    for field in msgspec.structs.fields(OperatorConfig):
        if field.name in OPERATOR_CONFIG_OWN_VALUES:
            continue
        node = {k: v for k, v in component["properties"][field.name].items() if k != "title"}
        properties[config_key(field.name)] = node
    return {
        "type": "object",
        "additionalProperties": False,
        "description": "The operator's settings (ASYA_OPERATOR_* variables).",
        "properties": properties,
    }


def operator_values_schema() -> dict[str, Any]:
    """`charts/asya-operator/values.schema.json`."""
    image = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "repository": {"type": "string", "minLength": 1},
            "tag": {"type": "string", "description": "Empty = the chart's appVersion."},
            "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
        },
        "required": ["repository"],
    }
    free = {"type": "object"}
    return {
        "$schema": _DRAFT,
        "title": "Values of the asya-operator chart",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "global": {**free, "description": "Helm's values shared with subcharts."},
            "image": {**image, "description": "The operator's image."},
            "imagePullSecrets": {"type": "array", "items": free},
            "sidecar": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"image": {**image, "description": "Every actor's sidecar."}},
                "required": ["image"],
            },
            "watchNamespace": {
                "anyOf": [
                    {"type": "string", "pattern": _DNS_LABEL_OR_EMPTY},
                    {
                        "type": "array",
                        "items": {"type": "string", "pattern": _DNS_LABEL, "minLength": 1},
                        "uniqueItems": True,
                    },
                ],
                "description": "Watch AsyncActors and ActorGroups in this namespace only, or in"
                " these (a list); empty = every one.",
            },
            "logLevel": {"enum": ["DEBUG", "INFO", "WARNING", "ERROR"]},
            "logFormat": {"enum": ["text", "json"]},
            "config": operator_config_schema(),
            "grafana": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "dashboard": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "enabled": {
                                "type": "boolean",
                                "description": "Ship the Grafana dashboard as a ConfigMap"
                                ' labelled grafana_dashboard: "1".',
                            }
                        },
                    }
                },
            },
            "resources": {**free, "description": "The operator container's resources."},
            "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
            "tolerations": {"type": "array", "items": free},
            "affinity": free,
            "podAnnotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "podLabels": {"type": "object", "additionalProperties": {"type": "string"}},
            "priorityClassName": {"type": "string"},
            "port": {
                "type": "integer",
                "minimum": 1,
                "maximum": 65535,
                "description": "The operator's /healthz and /metrics port.",
            },
            "metrics": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "service": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"enabled": {"type": "boolean"}},
                    },
                    "serviceMonitor": _monitor_schema(),
                    "podMonitor": _monitor_schema(),
                },
            },
        },
        "required": ["image", "sidecar"],
    }


def _monitor_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "enabled": {"type": "boolean"},
            "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }


def schema_files() -> dict[Path, str]:
    """Path under the charts' folder -> contents, for every schema file."""
    return {
        Path("asya-pipeline/values.schema.json"): _render(pipeline_values_schema()),
        Path("asya-platform/values.schema.json"): _render(platform_values_schema()),
        Path("asya-operator/values.schema.json"): _render(operator_values_schema()),
    }


def _render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write the charts' values.schema.json files."""
    parser = argparse.ArgumentParser(
        prog="python -m asya_operator.api.chart_schema", description=main.__doc__
    )
    parser.add_argument("charts", nargs="?", type=Path, default=CHARTS, help="charts folder")
    args = parser.parse_args(argv)
    for name, text in schema_files().items():
        path: Path = args.charts / name
        path.write_text(text, encoding="utf-8")
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
