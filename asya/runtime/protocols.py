"""Which frame protocols a sidecar serves, and what differs between them: the one place that knows.

The sidecar image is one for the whole cluster and is upgraded with the operator, while each
team's runtime is fixed by the team's own image. So a sidecar serves runtimes of its own
protocol (`frames.PROTOCOL`) and of the one before (`OLDEST`): that window lets the operator be
upgraded first and each team rebuild its image in its own time. A runtime names its protocol
in its Pong; the sidecar's client takes that version's `Dialect` and, from then on, sends that
runtime only what it reads. A runtime outside the window is refused, the message naming the
versions and what to upgrade.

What changed, version by version (the runtime's side of the socket):
- 3: the Drain frame: calls held at the runtime and not started are answered `NotStarted`
  at once. A sidecar pipelines calls (sends more than the runtime runs, queued behind the
  running ones) only to a runtime it can drain.
- 2: the Pong names its protocol; the actor's options cross as one Struct (`ActorConfig`,
  its retry schedule a `RetrySchedule`). No Drain: a Drain is a frame a protocol-2 runtime
  does not know, and it closes the connection on it.
- 0: a Pong without `protocol`, from before the field (its options flat).

What every version keeps, so that a sidecar can always read a runtime's Pong far enough to
refuse it by name: a Ping is its tag and id, and a Pong only gains fields with defaults.

The window is one way. A runtime does not serve sidecars older than itself: the runbook
upgrades the sidecar first (it rolls with the operator), so a runtime newer than its sidecar
means the operator is behind, and the older sidecar refuses it with its own message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from asya.errors import RuntimeProtocolError
from asya.runtime.frames import PROTOCOL


@dataclass(frozen=True, kw_only=True)
class Dialect:
    """What a runtime of one protocol version reads and does, as far as the sidecar cares."""

    version: int
    drains: bool
    """The runtime reads the Drain frame. Only then may calls wait at it behind the running
    ones (pipelined): without a Drain, a stopping sidecar could not turn them back, and they
    would start after all (and run twice if cut by the grace period)."""

    def pipeline_depth(self, wanted: int) -> int:
        """Calls to queue behind each running one at this runtime, for a sidecar set to
        `wanted` (`ASYA_PIPELINE_DEPTH`): none at a runtime that cannot be drained."""
        return wanted if self.drains else 0


DIALECTS: Final = {
    3: Dialect(version=3, drains=True),
    2: Dialect(version=2, drains=False),
}
"""The versions a sidecar serves: this one and the one before."""

OLDEST: Final = min(DIALECTS)
"""The oldest runtime protocol a sidecar serves."""


def dialect_of(version: int) -> Dialect:
    """The dialect of a runtime that names `version` in its Pong.

    Raises:
        RuntimeProtocolError: `version` is outside the window; the message names the versions
            and what to upgrade.
    """
    dialect = DIALECTS.get(version)
    if dialect is not None:
        return dialect
    window = f"this sidecar serves runtimes of protocol {OLDEST} to {PROTOCOL}"
    if version > PROTOCOL:
        raise RuntimeProtocolError(
            f"the runtime speaks frame protocol {version}, newer than this sidecar's {PROTOCOL}"
            f" ({window}): upgrade the asya operator, which gives every actor's pod its sidecar,"
            " to the asya version of the actor's image or newer"
        )
    raise RuntimeProtocolError(
        f"the runtime speaks frame protocol {version}, older than this sidecar serves"
        f" ({window}): rebuild the actor's image with the asya version of the operator"
    )
