"""The `asya` command.

    asya dev APP --input FILE      run an app's actors over a file of inputs
    asya serve APP --broker URL    run an app's actors until SIGTERM (exit 0; see its --help)
    asya send --route a,b ...      send one envelope (to a broker, or to an app in-process)
    asya render APP --image IMAGE  write Helm values for an app's actors (asya-pipeline chart)
    asya admission simulate FILE   run the admission engine on a scenario
    asya gpus [-o json]            list this machine's GPUs (NVML) and their flavors
    asya status [--watch]          one table of actors: queues, replicas, and why
    asya clean APP --namespace NS  delete a namespace's queues and streams (after asya serve)
    asya migrate-queues APP --namespace NS
                                   move what queues of the old names hold into the new ones

An entry point: reads the environment once (`asya.settings`), parses arguments (argparse),
calls the library and turns its errors into one-line messages and exit codes: 0 success,
1 an envelope failed (unless --allow-failures), 2 bad usage, settings, a route that cannot
work or an app that cannot start, 130 interrupted (SIGINT, Ctrl-C), 143 terminated (SIGTERM).
Either signal stops the run the same way: every process it started is stopped and the queues
of a fresh namespace are deleted before the exit. A closed stdout (`asya dev ... | head`) is
not an error: the run finishes, is counted in full, and exits with its own code.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from asya import logs
from asya.cli import (
    admission,
    clean,
    dev,
    gpus,
    migrate_queues,
    render,
    replay,
    results,
    send,
    serve,
    status,
)
from asya.cli.options import EXIT_USAGE
from asya.errors import AsyaError
from asya.settings import env_var, load_settings


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `asya` console script."""
    args = _parser().parse_args(argv)
    environ = dict(os.environ)
    if args.log_level is not None:  # --log-level wins over ASYA_LOG_LEVEL, checked the same way
        environ[env_var("log_level")] = args.log_level.upper()
    try:
        settings = load_settings(environ)
    except AsyaError as exc:
        print(f"asya: {exc}", file=sys.stderr)
        return EXIT_USAGE
    logs.configure(settings.process)
    try:
        code: int = args.run(args, settings)
    except AsyaError as exc:
        print(f"asya: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("asya: interrupted", file=sys.stderr)
        return 130
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="asya", description="Multi-step AI/ML pipelines built from actors."
    )
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING (default) or ERROR")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    dev.add_parser(commands)
    results.add_parser(commands)
    replay.add_parser(commands)
    serve.add_parser(commands)
    send.add_parser(commands)
    render.add_parser(commands)
    admission.add_parser(commands)
    gpus.add_parser(commands)
    status.add_parser(commands)
    clean.add_parser(commands)
    migrate_queues.add_parser(commands)
    return parser
