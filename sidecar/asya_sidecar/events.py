"""What the sidecar tells the world about each envelope: step events and final records.

`StepEvents` is one of the consumer's hooks (`asya.hooks`): optionally one JSON line per
finished step on stdout (`ASYA_STEP_EVENTS`, read by `asya dev --isolate` to know when a run
is over), and a count per outcome. (The end actors' log sink is `asya.crew.sinks.LogSink`.)
"""

from __future__ import annotations

import collections
import json
import sys
from typing import TextIO

from asya.hooks import Hooks, StepResult


class StepEvents(Hooks):
    def __init__(self, *, emit: bool, stream: TextIO = sys.stdout) -> None:
        self._emit = emit
        self._stream = stream
        self.counts: collections.Counter[str] = collections.Counter()

    def stepped(
        self, actor: str, result: StepResult, reason: str, duration_s: float, outputs: int
    ) -> None:
        self.counts[result.value] += 1
        if self._emit:
            event = {
                "event": "step",
                "actor": actor,
                "result": result.value,
                "reason": reason,
                "duration_s": round(duration_s, 6),
                "outputs": outputs,
            }
            self._stream.write(json.dumps(event) + "\n")
            self._stream.flush()
