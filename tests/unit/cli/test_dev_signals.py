"""`asya dev` stopped by a signal ends as that signal says, whatever else fails on the way out."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from asya.cli.dev import _TerminatedError, _until_signal
from asya.errors import ActorDefinitionError, TransportError


def stopped_by(signum: int, failure: Exception) -> None:
    """Run a main that signals its own process, then fails with `failure` while it stops."""

    async def main() -> None:
        try:
            os.kill(os.getpid(), signum)
            await asyncio.Event().wait()  # until the signal's cancellation
        except asyncio.CancelledError:
            raise failure from None

    async def run() -> None:
        await _until_signal(main())

    asyncio.run(run())


@pytest.mark.parametrize(
    "failure",
    [
        TransportError("the broker went away while the queues were deleted"),
        ActorDefinitionError("review/sidecar (worker 0) exited with code 0", actor="review"),
    ],
)
def test_ctrl_c_is_an_interrupt_even_when_cleanup_or_a_stopped_child_fails(failure):
    with pytest.raises(KeyboardInterrupt):
        stopped_by(signal.SIGINT, failure)


def test_sigterm_is_a_termination_even_when_cleanup_fails():
    with pytest.raises(_TerminatedError):
        stopped_by(signal.SIGTERM, TransportError("the broker went away"))


def test_the_previous_ctrl_c_handler_is_back_afterwards():
    before = signal.getsignal(signal.SIGINT)

    async def run() -> int:
        async def main() -> int:
            return 7

        return await _until_signal(main())

    assert asyncio.run(run()) == 7
    assert signal.getsignal(signal.SIGINT) is before
