"""docs/metrics.md lists every metric the sidecar and operator export, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

from asya_operator.metrics import REGISTRY as OPERATOR_REGISTRY

from asya.metrics import Metrics

DOC = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def _exposed_name(name: str, kind: str) -> str:
    return f"{name}_total" if kind == "counter" else name


def test_the_metrics_tables_name_every_exported_metric_and_nothing_else():
    families = {
        **Metrics().family_names(),
        **{family.name: family.type for family in OPERATOR_REGISTRY.collect()},
    }

    documented = re.findall(r"^\| `(asya_[a-z_]+)` \|", DOC.read_text(), flags=re.MULTILINE)

    assert sorted(documented) == sorted(_exposed_name(n, k) for n, k in families.items())
