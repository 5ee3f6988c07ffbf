"""How aiormq fails a publish when it closes its own connection.

When aiormq closes a connection itself (a missed heartbeat, a reader that ended), it fails what
still waits on it (a publish's confirm, a channel being opened) with the exception it was closed
with: `CancelledError`, or a bare `Exception`. Neither is a cancellation of the waiting task nor
a bug in asya: the broker failed the publish, as with a lost connection (`TransportError`).
"""

from __future__ import annotations

import asyncio


def failed_by_a_close(exc: BaseException) -> bool:
    """Whether `exc`, raised while awaiting aiormq, is its way of failing what waited on a
    connection it closed (see the module docstring); a cancellation of the current task
    itself is not that."""
    if type(exc) is Exception:
        return True
    if isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        return task is not None and task.cancelling() == 0
    return False
