"""`asya-operator`: the operator's command line.

`asya-operator plan FILE.yaml...` reads asya's CRs from the files (multi-document YAML), and
prints as YAML every object the operator would create for them: a platform engineer's dry run,
with no cluster. When the files hold ResourcePools, it then prints, as YAML comments, the
admission what-if for them (`asya_operator.plans.whatif`). Each CR is checked as the API server
would check it on `kubectl apply` (`asya_operator.plans.files`); a bad one exits 2 with one line
naming the file, the object, the field and what to fix.

`asya-operator run [--namespace NS ...] [--verbose]` runs the controller
(`asya_operator.handlers`) with kopf until interrupted: in a pod with its service account,
elsewhere with the kubeconfig (`KUBECONFIG`, or `~/.kube/config`). Its settings come from
`ASYA_OPERATOR_*` variables.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

import kopf
import yaml

from asya.admission.scheduler import simulate
from asya.errors import SettingsError
from asya.logs import extra_fields, logfmt_pairs
from asya.settings import ProcessSettings, load_settings
from asya_operator.api.decoding import namespace_problem
from asya_operator.api.metadata import PLACEHOLDER_NAMESPACE
from asya_operator.config import DEFAULT_SIDECAR_IMAGE, OperatorConfig, load_operator_config
from asya_operator.operator import build
from asya_operator.plans.files import CrError, Crs, Document, read_crs
from asya_operator.plans.objects import PlannedObject, plan_objects
from asya_operator.plans.whatif import decisions, render_decisions, snapshot_of

_PLAN_HELP = (
    "Print, as YAML, every object the operator would create for the AsyncActors and"
    " ResourceFlavors in the files: each actor's Deployment, TriggerAuthentication and"
    " ScaledObject, and each namespace's end actors. Offline: no cluster is read. Owner"
    " references are left out (an AsyncActor has no uid until it is applied). When the files"
    " hold ResourcePools (with Cohorts, ActorGroups, Namespaces), the admission what-if"
    " follows as YAML comments: which AsyncActors and ActorGroup instances the pools would"
    " admit if every queue asked for its most, with which flavor and count, which would be"
    " preempted, and why the rest would wait. Each CR is first checked as the API server"
    " checks it on kubectl apply (unknown fields, the CRD's schema and CEL rules); a bad one"
    " exits 2 naming the field and the fix."
)


_RUN_HELP = (
    "Run the controller until interrupted: keep each AsyncActor's Deployment, KEDA objects,"
    " queues and status in sync, and the end actors of its namespace. The cluster is the"
    " service account's in a pod, else the kubeconfig's (KUBECONFIG). Settings come from"
    " ASYA_OPERATOR_* variables (ASYA_OPERATOR_SIDECAR_IMAGE, ...); logs follow ASYA_LOG_LEVEL"
    " (default WARNING) and ASYA_LOG_FORMAT (text or json)."
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="asya-operator", description="The asya operator: AsyncActors on Kubernetes."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    plan = commands.add_parser(
        "plan", help="print the objects the operator would create", description=_PLAN_HELP
    )
    plan.add_argument("files", nargs="+", type=Path, metavar="FILE.yaml")
    plan.add_argument(
        "--sidecar-image",
        default=DEFAULT_SIDECAR_IMAGE,
        help="image of every actor's sidecar container (default: %(default)s)",
    )
    plan.add_argument(
        "--namespace",
        default=PLACEHOLDER_NAMESPACE,
        help="namespace of the AsyncActors and ActorGroups that name none (default: %(default)s)",
    )
    run = commands.add_parser(
        "run", help="run the controller (kopf) against the cluster", description=_RUN_HELP
    )
    run.add_argument(
        "--namespace",
        action="append",
        default=[],
        type=_namespace_name,
        metavar="NS",
        help="watch AsyncActors and ActorGroups in this namespace only; repeat it for several"
        " (default: every namespace)",
    )
    run.add_argument(
        "--verbose", action="store_true", help="log kopf's and the handlers' steps (DEBUG)"
    )
    return parser


def _namespace_name(text: str) -> str:
    # A plain name: kopf would read `team-*` or `!kube-system` as a pattern, the cluster client
    # as a name, and the two would watch different namespaces.
    if namespace_problem(text) is not None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a namespace name (lowercase letters, digits and '-', at most 63)"
        )
    return text


def _run(args: argparse.Namespace) -> int:
    try:
        process = load_settings(os.environ).process
        # Checked before kopf starts: kopf would retry a failing startup handler for ever.
        config = load_operator_config(os.environ)
    except SettingsError as exc:
        print(f"asya-operator run: {exc}", file=sys.stderr)
        return 2
    configure_logging(process, verbose=args.verbose)
    namespaces = list(dict.fromkeys(args.namespace))  # each once, in the order given
    registry = build(config, namespaces=namespaces).registry
    # A registry of its own gets none of kopf's default login handlers: the client's config.
    kopf.on.login(registry=registry)(kopf.login_via_client)
    # Standalone: one replica, no KopfPeering objects to coordinate through.
    kopf.run(registry=registry, standalone=True, clusterwide=not namespaces, namespaces=namespaces)
    return 0


def configure_logging(process: ProcessSettings, *, verbose: bool) -> None:
    """kopf's log handler (each line prefixed with the object it concerns) at ASYA_LOG_LEVEL,
    as text or as one JSON object per line (ASYA_LOG_FORMAT); --verbose means DEBUG. The
    fields a record carries (`extra=`, as everywhere in asya) are in both: kopf's JSON has
    them, and the text lines end with them as `key=value`."""
    level = "DEBUG" if verbose else process.log_level
    as_json = process.log_format == "json"
    kopf.configure(
        debug=level == "DEBUG",
        quiet=level not in ("DEBUG", "INFO"),
        log_format=kopf.LogFormat.JSON if as_json else kopf.LogFormat.FULL,
        log_prefix=True,
    )
    root = logging.getLogger()
    root.setLevel(level)
    if not as_json:
        for handler in root.handlers:
            if handler.formatter is not None and type(handler).__module__.startswith("kopf"):
                handler.setFormatter(_WithFields(handler.formatter))


_KOPF_FIELDS: Final = frozenset({"k8s_skip", "k8s_ref", "settings"})


class _WithFields(logging.Formatter):
    """kopf's text line, its first line ending with the record's own fields (`key=value`)."""

    def __init__(self, kopf_format: logging.Formatter) -> None:
        super().__init__()
        self._kopf_format = kopf_format

    def format(self, record: logging.LogRecord) -> str:
        line = self._kopf_format.format(record)
        fields = {k: v for k, v in extra_fields(record).items() if k not in _KOPF_FIELDS}
        first, newline, rest = line.partition("\n")
        return f"{first}{logfmt_pairs(fields)}{newline}{rest}"


def _documents(path: Path) -> Iterator[Document]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CrError(f"{path}: cannot read it: {exc.strerror}") from exc
    try:
        bodies = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise CrError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from exc
    for index, body in enumerate(bodies, start=1):
        yield Document(f"{path}: document {index}", body)


def render(planned: Sequence[PlannedObject]) -> str:
    """The planned objects as multi-document YAML, each after a comment saying what it is for."""
    parts = []
    for item in planned:
        meta = item.body["metadata"]
        head = f"# {item.body['kind']} {meta['namespace']}/{meta['name']}, for {item.origin}"
        parts.append(f"---\n{head}\n{yaml.safe_dump(item.body, sort_keys=False)}")
    return "".join(parts)


def _plan(args: argparse.Namespace) -> int:
    config = OperatorConfig(sidecar_image=args.sidecar_image)
    try:
        documents = [doc for path in args.files for doc in _documents(path)]
        crs = read_crs(documents, args.namespace)
        text = render(plan_objects(crs, config)) + _admission(crs)
    except CrError as exc:
        print(f"asya-operator plan: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


def _admission(crs: Crs) -> str:
    """The admission what-if as YAML comments, or nothing when the files hold no pool.

    Raises:
        CrError: the engine refuses the scenario the CRs describe.
    """
    if not crs.pools:
        return ""
    snapshot = snapshot_of(crs)
    return render_decisions(decisions(snapshot, simulate(snapshot.scenario)))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `asya-operator`; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "run":
        return _run(args)
    return _plan(args)


if __name__ == "__main__":
    sys.exit(main())
