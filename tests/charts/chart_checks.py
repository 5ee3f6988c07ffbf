"""Render and lint the charts with real Helm, and validate what they render, for tests.

Helm is `helm-python-sdk` (Helm v4's Go SDK; no binary, no cluster). Every rendered object is
validated the way a cluster would take it: built-in kinds with `kubernetes-validate` in strict
mode on two recent Kubernetes versions, asya's kinds against our CRDs (schema, defaults and
CEL rules, `tests.operator.cr_validation`), KEDA's against KEDA's CRD schemas.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Final

import helm_python as helm
import kubernetes_validate
import yaml
from asya_operator.api.crds import all_crds

from tests.operator.cr_validation import rejections, schema_errors
from tests.operator.plan_builders import KEDA_CRD_FILES, keda_schema

CHARTS: Final = Path(__file__).resolve().parents[2] / "charts"
OPERATOR_CHART: Final = CHARTS / "asya-operator"
PIPELINE_CHART: Final = CHARTS / "asya-pipeline"
PLATFORM_CHART: Final = CHARTS / "asya-platform"
KUBERNETES_VERSIONS: Final = ("1.33.0", kubernetes_validate.latest_version())
RELEASE: Final = "demo"
OPERATOR_IMAGES: Final[dict[str, Any]] = {
    "image": {"repository": "registry.example.com/asya-operator"},
    "sidecar": {"image": {"repository": "registry.example.com/asya-sidecar"}},
}
"""The operator chart's images, which every install names: none are published yet."""
NAMESPACE: Final = "apps"

# Kinds of the Prometheus Operator: no schema of theirs is kept here, so tests check them
# field by field instead.
UNVALIDATED_KINDS: Final = frozenset({"ServiceMonitor", "PodMonitor"})


def rendered(
    chart: Path, values: dict[str, Any], namespace: str = NAMESPACE
) -> list[dict[str, Any]]:
    """Every object `chart` renders for `values` (NOTES.txt left out), in template order."""
    with helm.Chart.load(str(chart)) as loaded:
        manifests = loaded.render(values, name=RELEASE, namespace=namespace)
    objects = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        objects += [doc for doc in yaml.safe_load_all(text) if doc]
    return objects


def notes(chart: Path, values: dict[str, Any], namespace: str = NAMESPACE) -> str:
    """The NOTES.txt `helm install` would print."""
    with helm.Chart.load(str(chart)) as loaded:
        manifests = loaded.render(values, name=RELEASE, namespace=namespace)
    return next(text for path, text in manifests.items() if path.endswith("NOTES.txt"))


def lint_problems(chart: Path, values: dict[str, Any]) -> list[str]:
    """Helm's strict lint, warnings and errors only, on each Kubernetes version."""
    problems = []
    for version in KUBERNETES_VERSIONS:
        report = helm.lint(
            str(chart), values, strict=True, namespace=NAMESPACE, kube_version=f"v{version}"
        )
        problems += [
            f"{version} {m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= 2
        ]
    return problems


@functools.cache
def _our_crds() -> dict[str, dict[str, Any]]:
    return {crd["spec"]["names"]["kind"]: crd for crd in all_crds()}


def validation_problems(obj: dict[str, Any]) -> list[str]:
    """Why a cluster would refuse `obj` (empty: it would take it)."""
    kind, group = obj["kind"], obj["apiVersion"].rpartition("/")[0]
    if group == "asya.sh":
        return rejections(obj, _our_crds()[kind])
    if group == "keda.sh":
        assert kind in KEDA_CRD_FILES, f"no KEDA schema kept for {kind}"
        return schema_errors(obj, keda_schema(kind))
    if kind in UNVALIDATED_KINDS:
        return []
    problems = []
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"{version}: {exc}")
    return problems


def check_all(objects: list[dict[str, Any]]) -> None:
    """Assert that every object validates; the message lists each refusal."""
    refused = {
        f"{obj['kind']} {obj['metadata']['name']}": problems
        for obj in objects
        if (problems := validation_problems(obj))
    }
    assert not refused, f"objects a cluster would refuse: {refused}"


def of_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """The objects of `kind`, by name."""
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == kind}


def values_error(chart: Path, values: dict[str, Any]) -> str:
    """The message Helm refuses `values` with (the test fails if it renders)."""
    try:
        rendered(chart, values)
    except (helm.HelmValuesError, helm.HelmRenderError) as exc:
        return str(exc)
    raise AssertionError(f"{chart.name} rendered values it should refuse: {values}")
