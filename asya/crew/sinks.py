"""Sinks that end actors hand final envelopes to, beside the durable end records.

`LogSink` writes one structured log line per final envelope (INFO), without its payload
(payloads are not logged): what a pod or `asya serve` shows an operator. The records that
are kept are the end records (`asya.crew.records`), not these lines.
"""

from __future__ import annotations

import logging

from asya.envelope import Envelope

log = logging.getLogger(__name__)


class LogSink:
    """One log line per final envelope: its id, phase, reason and where it ended."""

    async def record(self, envelope: Envelope) -> None:
        status = envelope.status
        log.info(
            "final envelope",
            extra={
                "envelope_id": envelope.id,
                "phase": status.phase.value,
                "reason": status.reason.value if status.reason else None,
                "actor": status.actor,
                "route": list(envelope.route.prev),
            },
        )
