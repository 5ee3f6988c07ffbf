"""What every contender is given and must do.

A contender declares its queues (persistent, of the run's queue type where its library allows
it), starts its processes — each hop's consumer allowed the run's in-flight budget, as prefetch
and as concurrent calls — and describes its messages (`bench.traffic.Wire`). It does not wait
for its processes to be ready: the run's warm-up messages, sent through every hop and awaited
at the sink, are what says a contender is ready, the same for all. `stop` leaves no process
and no queue behind.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bench.procs import ProcessGroup
from bench.traffic import Wire

REPO = Path(__file__).resolve().parents[2]
"""The checkout: its `bench.apps` modules are what the contenders' processes import."""


@dataclass(frozen=True)
class Setup:
    """What one contender runs with; the same for every contender of a run."""

    url: str
    hops: int
    inflight: int
    """Messages one hop's consumer may hold and work on at once (prefetch = concurrency)."""
    queue_type: str
    """`quorum` or `classic`."""
    prefix: str
    """Unique per contender run: its queue names start with it."""
    workdir: Path
    """Logs and sockets."""

    @property
    def hop_names(self) -> list[str]:
        return [f"hop-{i}" for i in range(self.hops)]

    def env(self, extra: Mapping[str, str]) -> dict[str, str]:
        """This process's environment, with the checkout importable, plus `extra`."""
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        return {**os.environ, "PYTHONPATH": path, **extra}


PYTHON = sys.executable


class Contender(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def wire(self) -> Wire: ...

    @property
    def processes(self) -> ProcessGroup: ...

    @property
    def notes(self) -> Sequence[str]:
        """What a reader of the results must know about how this contender ran."""
        ...

    async def start(self) -> None: ...

    async def stop(self) -> list[str]:
        """Stop every process, delete every queue; returns processes that needed SIGKILL."""
        ...
