"""`asya admission simulate`: the admission engine on a scenario file, decisions as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asya.admission.model import load_scenario
from asya.admission.scheduler import result_as_dict, simulate
from asya.cli.options import EXIT_OK, EXIT_USAGE
from asya.errors import AdmissionError
from asya.settings import Settings

if TYPE_CHECKING:
    from asya.cli.options import Subparsers


def add_parser(commands: Subparsers) -> None:
    admission = commands.add_parser(
        "admission", help="what-if tools for quotas, preemption and gangs"
    )
    admission_commands = admission.add_subparsers(required=True, metavar="COMMAND")
    simulate_parser = admission_commands.add_parser(
        "simulate",
        help="run scheduling cycles on a scenario file and print the decisions as JSON",
        description=(
            "Load pools, cohorts and workloads from SCENARIO (YAML or JSON), run scheduling"
            " cycles until one changes nothing (or --cycles), and print which workloads hold"
            " quota, which were preempted, and why the rest are pending."
            " See docs/admission.md for the format."
        ),
    )
    simulate_parser.add_argument(
        "scenario", type=Path, metavar="SCENARIO", help="a .yaml or .json file"
    )
    simulate_parser.add_argument(
        "--cycles", type=int, help="stop after this many cycles (default: until nothing changes)"
    )
    simulate_parser.set_defaults(run=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    try:
        text = args.scenario.read_text(encoding="utf-8")
    except OSError as exc:
        print(f"asya: cannot read the scenario: {exc}", file=sys.stderr)
        return EXIT_USAGE
    raw = _parse(text, args.scenario)
    if args.cycles is not None and args.cycles < 1:
        raise AdmissionError("--cycles must be at least 1")
    result = simulate(load_scenario(raw), max_cycles=args.cycles)
    print(json.dumps(result_as_dict(result), indent=2))
    return EXIT_OK


def _is_object(document: object) -> bool:
    return isinstance(document, dict) and "apiVersion" in document and "kind" in document


def _parse(text: str, path: Path) -> dict[str, Any]:
    """Raises: AdmissionError if the file is not a mapping in YAML or JSON."""
    if path.suffix == ".json":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise AdmissionError(f"{path}: not valid JSON: {exc}") from exc
    else:
        try:
            import yaml  # optional: only YAML scenarios need PyYAML
        except ImportError as exc:
            raise AdmissionError(
                f"{path}: reading YAML needs PyYAML: pip install 'asya[yaml]' (or use .json)"
            ) from exc
        try:
            documents = list(yaml.safe_load_all(text))
        except yaml.YAMLError as exc:
            raise AdmissionError(f"{path}: not valid YAML: {exc}") from exc
        raw = documents[0] if len(documents) == 1 else documents
    objects = [d for d in (raw if isinstance(raw, list) else [raw]) if _is_object(d)]
    if objects:
        kinds = ", ".join(sorted({str(o["kind"]) for o in objects}))
        raise AdmissionError(
            f"{path}: holds Kubernetes objects ({kinds}), not a scenario: for what the operator"
            f" would admit of them run `asya-operator plan {path}`; a scenario's format is in"
            " docs/admission.md#scenario-format"
        )
    if not isinstance(raw, dict):
        raise AdmissionError(f"{path}: a scenario is a mapping with cohorts, pools and workloads")
    return raw
