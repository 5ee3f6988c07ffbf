"""Which event loop runs an asya process: uvloop when it is installed, else asyncio's own.

Every entry point (the CLI, the runtime and its workers, the sidecar) runs its main coroutine
through `run`. uvloop (in the `rabbitmq` extra) roughly halves the event loop's own cost per
envelope, which is most of a sidecar's CPU; nothing in asya depends on which loop runs.
`ASYA_EVENT_LOOP` chooses: `auto` (uvloop if installed), `asyncio`, or `uvloop` (required).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

from asya.errors import SettingsError

T = TypeVar("T")

EventLoopChoice = Literal["auto", "asyncio", "uvloop"]


def loop_factory(choice: EventLoopChoice) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory for `choice`; None means asyncio's default.

    Raises:
        SettingsError: uvloop was required but is not installed.
    """
    if choice == "asyncio":
        return None
    try:
        import uvloop  # optional: the core runs without it
    except ImportError as exc:
        if choice == "uvloop":
            raise SettingsError(
                "ASYA_EVENT_LOOP=uvloop but uvloop is not installed: pip install uvloop",
                variable="ASYA_EVENT_LOOP",
                value=choice,
            ) from exc
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(main: Coroutine[Any, Any, T], choice: EventLoopChoice = "auto") -> T:
    """Run `main` to completion on the chosen loop, as `asyncio.run` does."""
    with asyncio.Runner(loop_factory=loop_factory(choice)) as runner:
        return runner.run(main)
