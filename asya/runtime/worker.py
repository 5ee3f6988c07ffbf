"""A runtime worker process: loads the handler once, then serves calls on an inherited socket.

Started by `asya.runtime.workers` as `python -m asya.runtime.worker FD PARENT_PID [LISTEN_FD]`
with `ASYA_HANDLER` set; it dies with its parent (`die_with_parent`). With LISTEN_FD, a listening
socket, it also serves direct calls from the sidecar there (`asya.runtime.direct`): the same
frames, the same handler, each connection answered on its own. It takes more calls than it
runs at once (its capacity): the next one waits in this process, decoded, to start the moment
the running one returns.
It answers its parent's first Ping only once the handler is loaded (a class actor's `__init__`
has run), or sends a Fault and exits if it cannot load. If a sync call had to be abandoned on a
thread after its timeout, the worker tells every peer it is leaving (a Drain), answers what it
holds and exits, so its parent starts a fresh one: a stuck call never keeps running (or
holding a GPU) behind the runtime's back.
What the handler writes to stdout goes to stderr: stdout is not the handler's to use.
"""

from __future__ import annotations

import asyncio
import ctypes
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
from asya.runtime.connection import WorkerConnection
from asya.runtime.frames import Drain, Fault, encode_frame, frame_bounds
from asya.settings import load_settings

EXIT_TAINTED = 3
"""Exit code of a worker that left a timed-out call running on a thread."""

EXIT_ORPHANED = 4
"""Exit code of a worker whose parent was gone before it started."""


def capacity_of(is_async: bool, concurrency: int) -> int:
    """Calls one worker takes at once: async handlers share a loop, sync ones get a process."""
    return concurrency if is_async else 1


async def _serve(
    fd: int,
    listen_fd: int | None,
    handler: str | None,
    overrides: str | None,
    grace_s: float,
    limits: Limits,
) -> int:
    sock = socket.socket(fileno=fd)
    listening = None if listen_fd is None else socket.socket(fileno=listen_fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    abandoned = asyncio.Event()
    try:
        if not handler:
            raise AsyaError("ASYA_HANDLER is not set: name the handler as module:attr")
        spec = load_handler(handler)
        if overrides:
            spec = apply_overrides(spec, parse_overrides(overrides))
        capacity = capacity_of(spec.style.is_async, spec.concurrency)
        # It takes more calls than it runs at once: the next one waits here, decoded, ready.
        invoker = LocalInvoker(spec, slots=capacity, on_abandon=abandoned.set)
        await invoker.start()
    except AsyaError as exc:
        writer.write(encode_frame(Fault(0, str(exc))))
        await writer.drain()
        writer.close()
        return 1
    bounds = frame_bounds(limits, spec.batch)
    connection = WorkerConnection(reader, writer, invoker, spec.config, capacity, bounds)
    connections = {connection}
    direct: set[asyncio.Task[None]] = set()

    async def serve_direct(
        direct_reader: asyncio.StreamReader, direct_writer: asyncio.StreamWriter
    ) -> None:
        peer = WorkerConnection(
            direct_reader, direct_writer, invoker, spec.config, capacity, bounds
        )
        connections.add(peer)
        task = asyncio.current_task()
        if task is not None:
            direct.add(task)
        try:
            await peer.serve()
            await peer.drain(grace_s)  # what it asked for is answered, if it is still there
        finally:
            connections.discard(peer)
            if task is not None:
                direct.discard(task)
            await peer.close()

    server = None
    if listening is not None:
        server = await asyncio.start_unix_server(serve_direct, sock=listening)
    serving = asyncio.create_task(connection.serve())
    tainted = asyncio.create_task(abandoned.wait())
    await asyncio.wait({serving, tainted}, return_when=asyncio.FIRST_COMPLETED)
    if server is not None:
        server.close()
    if abandoned.is_set():
        # Start nothing more: the calls waiting here, and any that comes, go back to their
        # callers (to another worker); tell each first, so that none sends more after we are
        # gone.
        invoker.refuse()
        for peer in list(connections):
            await peer.send(Drain(0))
        await asyncio.gather(*(peer.drain(grace_s) for peer in list(connections)))
        for peer in list(connections):
            await peer.close()
        # A thread is still running user code: only leaving the process stops it.
        os._exit(EXIT_TAINTED)
    tainted.cancel()
    # The runtime closed our socket pair: it is stopping, or retiring this worker. The calls
    # in flight on every connection finish within the grace period.
    await asyncio.gather(*(peer.drain(grace_s) for peer in list(connections)))
    await invoker.aclose()
    for peer in list(connections):
        await peer.close()
    for task in list(direct):
        task.cancel()
    await asyncio.gather(*direct, return_exceptions=True)
    return 0


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Have the kernel kill this process when `parent` dies, however it dies (`kill -9`, the
    OOM killer): a worker never outlives the process that started it, nor keeps its GPU.
    Linux only; elsewhere the worker exits when its socket closes, once its call returns."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(EXIT_ORPHANED)


def _stdout_to_stderr() -> None:
    """Point stdout at stderr, descriptor 1 included (a C library's writes, a child process).

    A worker's stdout is not the handler's to use: it is inherited from `asya dev`, which
    prints finals there, or `asya serve`; what user code prints is a log line like any other.
    """
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (1, 2, 3) or not all(a.isdigit() for a in args):
        print(
            "usage: python -m asya.runtime.worker FD [PARENT_PID [LISTEN_FD]]"
            " (started by the runtime)",
            file=sys.stderr,
        )
        return 2
    if len(args) >= 2:
        die_with_parent(int(args[1]))
    _stdout_to_stderr()
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
        int(args[0]),
        int(args[2]) if len(args) == 3 else None,
        runtime.handler,
        runtime.actor_overrides,
        runtime.grace_s,
        settings.limits,
    )
    return event_loop.run(main, settings.process.event_loop)


if __name__ == "__main__":
    raise SystemExit(main())
