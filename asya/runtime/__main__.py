"""`python -m asya.runtime`: serve the handler named by ASYA_HANDLER on ASYA_SOCKET_PATH.

Starts the worker processes (each loads the handler once), listens on the socket, and on
SIGTERM or SIGINT drains for ASYA_GRACE_S before exiting 0. Exits 2 with a one-line message
when the settings or the handler are wrong.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from asya import event_loop, logs
from asya.errors import AsyaError
from asya.runtime.server import RuntimeServer
from asya.runtime.workers import ProcessInvoker
from asya.settings import (
    RUNTIME_VARIABLES,
    Settings,
    env_var,
    load_settings,
    variables_parser,
)

log = logging.getLogger("asya.runtime")


async def serve(settings: Settings, env: dict[str, str]) -> None:
    """Run until SIGTERM or SIGINT.

    Raises:
        AsyaError: no handler set, or the handler cannot be loaded.
    """
    runtime = settings.runtime
    if not runtime.handler:
        raise AsyaError(f"{env_var('handler')} is not set: name the handler as module:attr")
    invoker = ProcessInvoker(
        runtime.handler,
        env=env,
        workers=runtime.workers,
        depth=settings.process.pipeline_depth,
        kill_grace_s=runtime.kill_grace_s,
        direct_path=runtime.socket_path,
    )
    await invoker.start()
    assert invoker.info is not None
    assert invoker.bounds is not None
    server = RuntimeServer(
        invoker,
        invoker.info,
        invoker.capacity,
        runtime.socket_path,
        invoker.bounds,
        workers=invoker,
    )
    await server.start()
    log.info("runtime serving", extra={"actor": invoker.info.name, "socket": runtime.socket_path})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    # stderr: stdout belongs to the user's handler (and `asya dev` prints results there).
    print(
        f"asya runtime: serving '{invoker.info.name}' on {runtime.socket_path}",
        file=sys.stderr,
        flush=True,
    )
    await stop.wait()
    stopping_at = loop.time()
    await server.stop(runtime.grace_s)
    # Direct calls (the sidecar's, on the workers' own sockets) finish within what is left of
    # the grace period.
    left_s = runtime.grace_s - (loop.time() - stopping_at)
    await invoker.aclose(max(left_s, runtime.kill_grace_s))
    await server.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m asya.runtime` (no arguments but --help)."""
    variables_parser(
        "python -m asya.runtime",
        "Serves the handler named by ASYA_HANDLER on ASYA_SOCKET_PATH, in worker processes.",
        RUNTIME_VARIABLES,
    ).parse_args(argv)
    try:
        settings = load_settings(os.environ)
        logs.configure(settings.process)
        event_loop.run(serve(settings, dict(os.environ)), settings.process.event_loop)
    except AsyaError as exc:
        print(f"asya runtime: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
