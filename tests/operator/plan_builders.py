"""For the `plan_*` tests: small builders of typed CRs (only what a test changes is written),
and KEDA's CRD schemas (copies in tests/operator/schemas/)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import msgspec
import yaml
from asya_operator.api.actor import AsyncActor
from asya_operator.api.flavor import ResourceFlavor

from tests.operator.cr_validation import openapi_schema

SCHEMAS = Path(__file__).resolve().parent / "schemas"
"""Upstream CRDs kept as validation data (KEDA's among them), beside the repository."""

KEDA_CRD_FILES = {
    "ScaledObject": "keda.sh_scaledobjects.yaml",
    "TriggerAuthentication": "keda.sh_triggerauthentications.yaml",
}


def async_actor(
    name: str = "normalize",
    *,
    uid: str | None = "6f1c1c9e-0000-4000-8000-000000000001",
    generation: int | None = None,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> AsyncActor:
    """An AsyncActor; `spec` fields are camelCase, as in YAML (`minReplicas=...` via scaling)."""
    metadata: dict[str, Any] = {"name": name}
    if uid is not None:
        metadata["uid"] = uid
    if generation is not None:
        metadata["generation"] = generation
    body: dict[str, Any] = {
        "apiVersion": "asya.sh/v1alpha1",
        "kind": "AsyncActor",
        "metadata": metadata,
        "spec": {"image": "registry.example.com/app:1", "handler": "app.text:normalize", **spec},
    }
    if status is not None:
        body["status"] = status
    return msgspec.convert(body, AsyncActor)


def resource_flavor(name: str = "general-cpu", **spec: Any) -> ResourceFlavor:
    """A ResourceFlavor; `spec` fields are camelCase (`nodeLabels`, `nodeTaints`, ...)."""
    body = {
        "apiVersion": "asya.sh/v1alpha1",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": spec,
    }
    return msgspec.convert(body, ResourceFlavor)


@functools.cache
def keda_schema(kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of KEDA's CRD for `kind` (ScaledObject, TriggerAuthentication)."""
    path = SCHEMAS / KEDA_CRD_FILES[kind]
    assert path.exists(), f"KEDA's CRD {path.name} is missing: it belongs in {SCHEMAS}"
    return openapi_schema(yaml.safe_load(path.read_text(encoding="utf-8")))
