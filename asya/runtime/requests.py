"""Requests: the calling side's table of requests sent on one connection and not answered yet.

The frame protocol matches an answer to its request by id, and a connection carries many
requests at once (see `asya.runtime.frames`). This module owns that matching for both callers
of the protocol: `RuntimeClient` (the sidecar's connection to the runtime) and
`ProcessInvoker` (the runtime's connection to each worker process). It hands out ids, keeps one
answer future per request, in the order the requests were sent (a serving peer runs the first
ones it holds and queues the rest in that order, so its caller can tell which have started),
answers a request by id, and answers or fails everything left when the connection ends.

It does no I/O and starts no task: the caller sends the frame, reads the answers and decides
what a request left open at the end of the connection means (an error, or a retry elsewhere).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

_A = TypeVar("_A")
"""An answer: what the peer's reply to one request is turned into."""

_C = TypeVar("_C")
"""What the caller keeps with each request (its own per-request state)."""


class Request(Generic[_A, _C]):
    """One request sent and not answered yet."""

    __slots__ = ("answer", "context", "id")

    def __init__(self, request_id: int, answer: asyncio.Future[_A], context: _C) -> None:
        self.id = request_id
        """The id its frame carries, and its answer too."""
        self.answer = answer
        """Done once it is answered, or once the connection ended without an answer."""
        self.context = context


class Requests(Generic[_A, _C]):
    """See the module docstring. Ids start at 1 (0 is left for frames that get no answer)."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._open: dict[int, Request[_A, _C]] = {}

    def open(self, context: _C) -> Request[_A, _C]:
        """A new request with a fresh id, waiting for its answer until `answer`, `close` or
        the end of the connection takes it off."""
        request_id = next(self._ids)
        request = Request(request_id, asyncio.get_running_loop().create_future(), context)
        self._open[request_id] = request
        return request

    def answer(self, request_id: int, answer: _A) -> bool:
        """Answer the request `request_id` and take it off; False if no request of that id
        waits (an unknown id, one closed, or one whose caller stopped waiting)."""
        request = self._open.pop(request_id, None)
        if request is None or request.answer.done():
            return False
        request.answer.set_result(answer)
        return True

    def close(self, request_id: int) -> bool:
        """Take the request `request_id` off without answering it (its caller is done with
        it); whether it was still open."""
        return self._open.pop(request_id, None) is not None

    def end(self, answer_of: Callable[[Request[_A, _C]], _A]) -> None:
        """The connection ended: answer each open request with `answer_of(request)`, in the
        order sent, and take them all off."""
        ended, self._open = self._open, {}
        for request in ended.values():
            if not request.answer.done():
                request.answer.set_result(answer_of(request))

    def fail(self, error: Callable[[], BaseException]) -> None:
        """The connection ended: fail each open request with its own `error()` (one
        exception object per request, as each is raised in its own task), in the order sent,
        and take them all off."""
        ended, self._open = self._open, {}
        for request in ended.values():
            if not request.answer.done():
                request.answer.set_exception(error())

    def __len__(self) -> int:
        return len(self._open)

    def __iter__(self) -> Iterator[Request[_A, _C]]:
        """The open requests, in the order sent."""
        return iter(self._open.values())
