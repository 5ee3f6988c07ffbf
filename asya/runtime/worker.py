"""A runtime worker process: loads the handler once, then serves calls on an inherited socket.

Started by `asya.runtime.workers` as `python -m asya.runtime.worker FD` with `ASYA_HANDLER` set.
It answers its parent's first Ping only once the handler is loaded (a class actor's `__init__`
has run), or sends a Fault and exits if it cannot load. If a sync call had to be abandoned on a
thread after its timeout, the worker answers what it holds and exits, so its parent starts a
fresh one: a stuck call never keeps running (or holding a GPU) behind the runtime's back.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import Sequence

from asya import event_loop, logs
from asya.envelope import Limits
from asya.errors import AsyaError
from asya.handler import LocalInvoker, load_handler
from asya.overrides import apply_overrides, parse_overrides
from asya.runtime.connection import Connection
from asya.runtime.frames import Fault, encode_frame, frame_bounds
from asya.settings import load_settings

EXIT_TAINTED = 3
"""Exit code of a worker that left a timed-out call running on a thread."""


def capacity_of(is_async: bool, concurrency: int) -> int:
    """Calls one worker takes at once: async handlers share a loop, sync ones get a process."""
    return concurrency if is_async else 1


async def _serve(
    fd: int, handler: str | None, overrides: str | None, grace_s: float, limits: Limits
) -> int:
    sock = socket.socket(fileno=fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    abandoned = asyncio.Event()
    try:
        if not handler:
            raise AsyaError("ASYA_HANDLER is not set: name the handler as module:attr")
        spec = load_handler(handler)
        if overrides:
            spec = apply_overrides(spec, parse_overrides(overrides))
        invoker = LocalInvoker(spec, on_abandon=abandoned.set)
        await invoker.start()
    except AsyaError as exc:
        writer.write(encode_frame(Fault(0, str(exc))))
        await writer.drain()
        writer.close()
        return 1
    capacity = capacity_of(spec.style.is_async, spec.concurrency)
    bounds = frame_bounds(limits, spec.batch)
    connection = Connection(reader, writer, invoker, spec.config, capacity, bounds)
    serving = asyncio.create_task(connection.serve())
    tainted = asyncio.create_task(abandoned.wait())
    await asyncio.wait({serving, tainted}, return_when=asyncio.FIRST_COMPLETED)
    if abandoned.is_set():
        await connection.drain(grace_s)
        await connection.close()
        # A thread is still running user code: only leaving the process stops it.
        os._exit(EXIT_TAINTED)
    tainted.cancel()
    await connection.drain(grace_s)
    await invoker.aclose()
    await connection.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m asya.runtime.worker FD (started by the runtime)", file=sys.stderr)
        return 2
    # The runtime owns this process's life; Ctrl-C in a terminal reaches it through the parent.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        settings = load_settings(os.environ)
    except AsyaError as exc:
        print(f"asya runtime worker: {exc}", file=sys.stderr)
        return 2
    logs.configure(settings.process)
    runtime = settings.runtime
    main = _serve(
        int(args[0]), runtime.handler, runtime.actor_overrides, runtime.grace_s, settings.limits
    )
    return event_loop.run(main, settings.process.event_loop)


if __name__ == "__main__":
    raise SystemExit(main())
