"""`asya render`: the `asya-pipeline` chart's values from an app's decorated actors.

Imports the app the way `asya dev` does, turns each `@actor` into an entry under `actors`
(`asya.manifests`), merges an optional overlay over the result, checks the AsyncActors the chart
would make of it as the API server would (the CRD's schema and CEL rules), and writes YAML to
stdout or `-o FILE`. Nothing is contacted: no broker, no cluster.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from asya.cli.options import EXIT_OK
from asya.local.discovery import load_app
from asya.manifests import RenderError, cluster_problems, merge_overlay, render_values
from asya.settings import Settings

if TYPE_CHECKING:
    from asya.cli.options import Subparsers

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")

_DESCRIPTION = (
    "Write values for the asya-pipeline Helm chart from the @actor declarations in APP (a"
    " folder, a .py file or a module, as for `asya dev`): one entry under `actors` per actor,"
    " holding what its decorator sets (handler, scaling, resources, retry, timeout,"
    " concurrency, batch, pool, priority). Fields the decorator leaves at asya's defaults are"
    " left out: the chart's CRDs default them to the same numbers. What a decorator cannot say"
    " (flavor, env, the broker Secret, per-actor images) goes in --values-overlay, a YAML file"
    " merged over the result as Helm merges values files. A decorator value the AsyncActor"
    " CRD would refuse (a pool that is no Kubernetes object name, a retry base delay above its"
    " longest) exits 2 naming the actor, the field and the fix. So does anything the API"
    " server would refuse in the AsyncActors the chart makes of the result, overlay included:"
    " a field the CRD does not know, a wrong type or bound, a broken CEL rule (minReplicas"
    " above maxReplicas, a handler without ':'), checked with the CRD's own schema and rules"
    " (needs asya[render]). Then:"
    " helm install NAME charts/asya-pipeline -f values.yaml"
)


def add_parser(commands: Subparsers) -> None:
    parser = commands.add_parser(
        "render",
        help="write asya-pipeline chart values from an app's actors",
        description=_DESCRIPTION,
    )
    parser.add_argument("app", metavar="APP", help="folder, .py file or module holding the actors")
    parser.add_argument(
        "--image", required=True, help="container image with the app's code and asya installed"
    )
    parser.add_argument(
        "--namespace",
        help="Kubernetes namespace of the actors (default: the Helm release's namespace)",
    )
    parser.add_argument(
        "--values-overlay",
        type=Path,
        metavar="FILE",
        help="YAML merged over the rendered values (maps merge, lists and scalars replace,"
        " null removes a key)",
    )
    parser.add_argument(
        "-o",
        "--output",
        default="-",
        metavar="FILE",
        help="where to write the values (default: stdout)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Raises: ActorDefinitionError (the app), RenderError (image, namespace, overlay)."""
    yaml = _yaml()
    if args.namespace is not None:
        _check_namespace(args.namespace, "--namespace {!r}")
    app = load_app(args.app)
    values, rounded = render_values(app.specs, image=args.image, namespace=args.namespace)
    if args.values_overlay is not None:
        values = merge_overlay(values, _overlay(args.values_overlay, yaml))
    if values.get("namespace"):  # empty: the release's namespace
        _check_namespace(values["namespace"], "namespace {!r} (from --values-overlay)")
    _check(values, args.values_overlay)
    for item in rounded:
        print(
            f"asya render: {item.actor}: {item.field} is whole seconds on Kubernetes;"
            f" {item.given:g} s written as {item.written}",
            file=sys.stderr,
        )
    text = _HEADER.format(app=args.app) + yaml.safe_dump(values, sort_keys=False)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise RenderError(f"cannot write {args.output}: {exc.strerror}") from exc
        print(f"asya render: {len(values['actors'])} actors written to {args.output}")
    return EXIT_OK


_HEADER = (
    "# Values for the asya-pipeline chart, written by `asya render {app}`.\n"
    "# Render again after changing a decorator; put what decorators cannot say in an overlay.\n"
)


def _yaml() -> Any:
    try:
        import yaml  # optional: only rendering needs PyYAML
    except ImportError as exc:
        raise RenderError(
            "asya render writes YAML and needs PyYAML: pip install 'asya[render]'"
        ) from exc
    return yaml


def _check_namespace(namespace: object, given: str) -> None:
    """Raises: RenderError: `namespace` is no Kubernetes namespace name (`given`: where it
    came from, `{!r}` standing for it)."""
    if not (isinstance(namespace, str) and _DNS_LABEL.fullmatch(namespace)):
        raise RenderError(
            f"{given.format(namespace)} is not a Kubernetes namespace name: lowercase letters,"
            " digits and '-', at most 63, starting and ending with a letter or digit"
        )


CRD_SCHEMA: Final = "schemas/asyncactor.json"
"""The AsyncActor CRD's openAPIV3Schema, in the asya package (generated by the operator)."""


def _check(values: dict[str, Any], overlay: Path | None) -> None:
    """Raises: RenderError: the API server would refuse an AsyncActor the chart makes of
    `values`; the message names each field and says where to fix it."""
    schema = json.loads(resources.files("asya").joinpath(CRD_SCHEMA).read_text("utf-8"))
    try:
        problems = cluster_problems(values, schema)
    except ImportError as exc:
        package = {"celpy": "cel-python"}.get(str(exc.name), exc.name)
        raise RenderError(
            f"asya render checks what it writes against the AsyncActor CRD and needs {package}:"
            " pip install 'asya[render]'"
        ) from exc
    if problems:
        fix = "the decorator" + (f" or --values-overlay {overlay}" if overlay else "")
        raise RenderError(
            "the cluster would refuse these AsyncActors: "
            + "; ".join(problems)
            + f"; fix {fix} (names are the chart's values)"
        )


def _overlay(path: Path, yaml: Any) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RenderError(f"--values-overlay {path}: cannot read it: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise RenderError(f"--values-overlay {path}: not valid YAML: {exc}") from exc
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RenderError(f"--values-overlay {path}: must be a mapping of values, got {raw!r:.60}")
    return raw
