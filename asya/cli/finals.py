"""Where `asya dev` writes final envelopes: JSON lines on stdout, and the `--output` file.

stdout may be a pipe whose reader leaves early (`asya dev ... | head -1`). That is not a
failure of the run: from then on finals go to `--output` only, the run goes on and is
counted exactly, and the exit code is the run's own (0, or 1 for failed envelopes). Writing
must never raise into the end actors: a sink that raises would have its envelope requeued
and recorded again. Called from the end actors (through `RunStats`); an edge of the CLI.
"""

from __future__ import annotations

import os
from typing import IO

import msgspec

from asya.envelope import Envelope


class FinalsWriter:
    """Writes each final envelope as one JSON line; see the module docstring."""

    def __init__(self, stdout: IO[str], output: IO[str] | None = None) -> None:
        self._stdout = stdout
        self._output = output
        self.stdout_open = True
        self.written_to_stdout = 0

    async def emit(self, envelope: Envelope) -> None:
        line = msgspec.json.encode(envelope).decode() + "\n"
        if self.stdout_open:
            self._write_stdout(line)
        if self._output is not None:
            self._output.write(line)
            self._output.flush()

    def _write_stdout(self, line: str) -> None:
        try:
            self._stdout.write(line)
            self._stdout.flush()
        except (BrokenPipeError, ValueError):  # ValueError: the stream object was closed
            self.stdout_open = False
            _silence(self._stdout)
            return
        self.written_to_stdout += 1


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
