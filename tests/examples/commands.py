"""The examples' commands as a user types them: `asya dev` in a process of its own, and the
values `asya render` writes, rendered by the asya-pipeline chart and validated."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from asya.cli import main as asya_main
from tests.charts.chart_checks import PIPELINE_CHART, check_all, lint_problems, rendered

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def asya_dev(example: str, input_name: str, *extra: str) -> tuple[int, list[dict[str, Any]], str]:
    """`asya dev examples/EXAMPLE --input examples/EXAMPLE/INPUT`: (exit code, finals, stderr)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "asya.cli",
            "dev",
            f"examples/{example}",
            "--input",
            f"examples/{example}/{input_name}",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def render(example: str, *extra: str, tmp_path: Path) -> tuple[dict[str, Any], list[dict]]:
    """`asya render examples/EXAMPLE --image ... -o FILE`: the values, and the objects the
    chart renders from them, each validated as a cluster would (CRDs and CEL rules included)."""
    out = tmp_path / "values.yaml"
    code = asya_main(
        ["render", str(EXAMPLES / example), "--image", "example/image:1", "-o", str(out), *extra]
    )
    assert code == 0
    values = yaml.safe_load(out.read_text(encoding="utf-8"))
    objects = rendered(PIPELINE_CHART, values)
    check_all(objects)
    assert lint_problems(PIPELINE_CHART, values) == []
    return values, objects
