"""Where `asya dev` writes final envelopes: JSON lines on stdout, and the `--output` file.

stdout carries the finals and nothing else: while a run lasts, `stdout_to_stderr` points
whatever the process (and any process it starts) writes to stdout at stderr instead, and hands
the finals a stream of their own on the real stdout. A handler's `print`, in a thread or an
async handler, a child process it starts, a GPU worker: all of it lands on stderr, so
`asya dev ... | jq` sees JSON lines only.

With `--payloads`, stdout gets one line per final, `{"id": ..., "payload": ...}` (or
`{"id": ..., "error": {...}}` for a failure), where `id` is the input's envelope id; lines come
in input order, each input's finals in tree order (`InputOrder`), so a final waits until every
input before it has ended. `--output` still gets whole envelopes, as they come.

stdout may be a pipe whose reader leaves early (`asya dev ... | head -1`). That is not a
failure of the run: from then on finals go to `--output` only, the run goes on and is
counted exactly, and the exit code is the run's own (0, or 1 for failed envelopes). Writing
must never raise into the end actors: a sink that raises would have its envelope requeued
and recorded again. Called from the end actors (through `RunStats`); an edge of the CLI.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import msgspec

from asya.envelope import Envelope, Phase
from asya.lineage import Completion, path_of


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[IO[str]]:
    """While it lasts, `sys.stdout` is `sys.stderr`, and, where stdout is this process's
    descriptor 1, that descriptor points at stderr too (child processes inherit it); yields a
    stream on the real stdout, for the finals. Everything is put back on exit."""
    original = sys.stdout
    original.flush()
    if not (_is_fd(original, 1) and _is_fd(sys.stderr, 2)):
        # Not the process's own streams (a test's capture): only Python-level writes move.
        sys.stdout = sys.stderr
        try:
            yield original
        finally:
            sys.stdout = original
        return
    saved = os.dup(1)
    real = open(saved, "w", encoding=original.encoding, errors=original.errors)  # noqa: SIM115
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        yield real
    finally:
        sys.stdout = original
        # Out while 1 is still stderr: what user code wrote to `sys.__stdout__` is its output.
        # If the reader left, `saved` points at /dev/null by now (`_silence`), and so will 1.
        for stream in (original, real):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os.dup2(saved, 1)
        with contextlib.suppress(OSError, ValueError):
            real.close()


def _is_fd(stream: IO[str], fd: int) -> bool:
    try:
        return stream.fileno() == fd
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is both
        return False


class FinalsWriter:
    """Writes each final envelope, or with `payloads` its payload line; see the module
    docstring. `on_input` must hear each input's envelope id, in input order, and `finish`
    comes once the run is over."""

    def __init__(
        self, stdout: IO[str], output: IO[str] | None = None, *, payloads: bool = False
    ) -> None:
        self._stdout = stdout
        self._output = output
        self._order = InputOrder() if payloads else None
        self.stdout_open = True
        self.written_to_stdout = 0
        """Lines written to stdout: final envelopes, or payload lines."""

    def on_input(self, envelope_id: str) -> None:
        if self._order is not None:
            self._order.fed(envelope_id)

    async def emit(self, envelope: Envelope) -> None:
        line = _json_line(envelope)
        if self._order is None:
            self._write_stdout(line)
        else:
            for input_id, final in self._order.add(envelope):
                self._write_stdout(_json_line(payload_line(input_id, final)))
        if self._output is not None:
            self._output.write(line)
            self._output.flush()

    def finish(self) -> None:
        """Write what is still held back: nothing, unless a final's input never completed."""
        if self._order is not None:
            for input_id, final in self._order.rest():
                self._write_stdout(_json_line(payload_line(input_id, final)))

    def _write_stdout(self, line: str) -> None:
        if not self.stdout_open:
            return
        try:
            self._stdout.write(line)
            self._stdout.flush()
        except (BrokenPipeError, ValueError):  # ValueError: the stream object was closed
            self.stdout_open = False
            _silence(self._stdout)
            return
        self.written_to_stdout += 1


def _json_line(value: object) -> str:
    return msgspec.json.encode(value).decode() + "\n"


def payload_line(input_id: str, final: Envelope) -> dict[str, Any]:
    """What `--payloads` prints for one final: its payload, or what went wrong, under the id
    of the input it came from."""
    if final.status.phase is Phase.SUCCEEDED:
        return {"id": input_id, "payload": final.payload}
    status = final.status
    error: dict[str, Any] = {
        "reason": status.reason.value if status.reason is not None else None,
        "actor": status.actor,
    }
    if status.error is not None:
        error["message"] = status.error.message
    return {"id": input_id, "error": error}


def input_id_of(final: Envelope) -> str:
    """The id of the envelope its input was sent as: a fan-out child's id is its parent's
    plus `-<i>`, one for each branch of its lineage."""
    if not final.lineage:
        return final.id
    return final.id.rsplit("-", len(final.lineage))[0]


@dataclass
class _Tree:
    completion: Completion = field(default_factory=Completion)
    finals: list[Envelope] = field(default_factory=list)


class InputOrder:
    """Holds finals back until they can go out in input order, each input's in tree order.

    An input goes out once its fan-out tree is complete (`asya.lineage`) and every input
    before it has gone. Pure: no I/O.
    """

    def __init__(self) -> None:
        self._order: collections.deque[str] = collections.deque()
        self._trees: dict[str, _Tree] = {}

    def fed(self, input_id: str) -> None:
        """An input went in, after every one fed before it."""
        if input_id not in self._trees:  # an id given twice: its finals go out as one input
            self._trees[input_id] = _Tree()
            self._order.append(input_id)

    def add(self, final: Envelope) -> list[tuple[str, Envelope]]:
        """Hold `final`; return what can go out now, as (input id, final), in order."""
        input_id = input_id_of(final)
        self.fed(input_id)
        tree = self._trees[input_id]
        tree.completion.add(final.lineage)
        tree.finals.append(final)
        ready: list[tuple[str, Envelope]] = []
        while self._order and self._trees[self._order[0]].completion.is_complete:
            ready.extend(self._take(self._order.popleft()))
        return ready

    def rest(self) -> list[tuple[str, Envelope]]:
        """Everything still held, in input order, complete or not."""
        rest: list[tuple[str, Envelope]] = []
        while self._order:
            rest.extend(self._take(self._order.popleft()))
        return rest

    def _take(self, input_id: str) -> list[tuple[str, Envelope]]:
        tree = self._trees.pop(input_id)
        return [(input_id, f) for f in sorted(tree.finals, key=lambda f: path_of(f.lineage))]


def _silence(stream: IO[str]) -> None:
    """Point the stream's descriptor at /dev/null, as the Python docs advise for SIGPIPE.

    What is still buffered would otherwise fail again when the interpreter flushes stdout on
    exit ("Exception ignored ... BrokenPipeError"), and a handler's print() in this process
    would raise into the user's code.
    """
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # not a real file (a test's capture): nothing to flush
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
