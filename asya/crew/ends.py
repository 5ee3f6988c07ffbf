"""The end actors: where every envelope's journey is recorded and answered.

`happy-end` and `error-end` consume their queues like any actor, append each final envelope to
the namespace's end records (`happy-end` to the results, `error-end` to the failures: the
transport's `RecordStore`, see `asya.transport.records`), hand it to a `Sink` (the local
runner prints and counts; the sidecar logs), answer the `reply_to` queue if the envelope names
one, and tell their loop to ack. Nothing is acked before its record is confirmed: a record
that is not (`TransportError`) gives the message back to the queue, so a crash in between
records an envelope twice, never zero times. The records' logs are declared at start, and a
broker that cannot keep them stops the end actor there. Nothing is refused and nothing is lost:
- bytes that are not an envelope are wrapped with their reason (and a bounded record of the
  body) and recorded at `error-end`;
- at `error-end`, an envelope the broker dead-lettered is recorded with the broker's reason
  (`DeliveryLimitExceeded`, `Expired`, `QueueOverflow`, `Rejected`), and one published there
  without a failed status as `NoFailureRecorded`: every way in has its own reason;
- what the sink cannot store goes to the namespace's parking queue with the sink's error, and
  only a broker that cannot even take that makes the message go back to the queue;
- `reply_to` is answered only when it names a reply queue of this namespace (one a client
  declared for it, see `asya.transport.base`); anything else is refused with a log line, and
  the envelope is still recorded exactly once.
With `metrics`, each recorded envelope counts as an arrival at its end, by reason.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Final, Protocol

from asya.clock import Clock
from asya.envelope import (
    END_LIMITS,
    REPLY_TO_HEADER,
    Envelope,
    Phase,
    Reason,
    decode_envelope,
    encode_envelope,
    new_envelope_id,
)
from asya.errors import EnvelopeError, TransportError, UnknownActorError
from asya.hooks import combined
from asya.message_loop import MessageLoop, OnePhase, Settle
from asya.metrics import Metrics
from asya.routing import ERROR_END, HAPPY_END, Rejection, plan_malformed, plan_rejection
from asya.transport.base import Death, DeathReason, Message, Transport
from asya.transport.records import RecordKind

log = logging.getLogger(__name__)

DEATH_REASONS: Final = {
    DeathReason.DELIVERY_LIMIT: Reason.DELIVERY_LIMIT_EXCEEDED,
    DeathReason.EXPIRED: Reason.EXPIRED,
    DeathReason.MAXLEN: Reason.QUEUE_OVERFLOW,
    DeathReason.REJECTED: Reason.REJECTED,
}

RECORD_KINDS: Final = {HAPPY_END: RecordKind.RESULTS, ERROR_END: RecordKind.FAILURES}
"""Which log each end actor appends its final envelopes to."""

_DEATH_WORDS: Final = {
    DeathReason.DELIVERY_LIMIT: "redelivered past its delivery limit: it kept crashing"
    " the consumer",
    DeathReason.EXPIRED: "its time to live ran out before it was consumed",
    DeathReason.MAXLEN: "the queue was over its length limit",
    DeathReason.REJECTED: "a consumer rejected it",
}


class Sink(Protocol):
    """Where final envelopes are kept."""

    async def record(self, envelope: Envelope) -> None: ...


def arrival_rejection(envelope: Envelope, death: Death | None) -> Rejection | None:
    """Why an envelope reached `error-end`, when no actor's failure says so already."""
    if death is not None:
        return Rejection(
            DEATH_REASONS[death.reason],
            f"dead-lettered by the broker from {death.queue}: {_DEATH_WORDS[death.reason]}",
        )
    if envelope.status.phase is not Phase.FAILED:
        return Rejection(
            Reason.NO_FAILURE_RECORDED,
            f"published to {ERROR_END} with phase '{envelope.status.phase.value}' and no"
            " failure: error-end records failures that actors decided",
        )
    return None


class EndActor:
    """Consumes `happy-end` or `error-end`; see the module docstring."""

    def __init__(
        self,
        name: str,
        *,
        transport: Transport,
        sink: Sink,
        clock: Clock,
        rng: random.Random,
        concurrency: int = 16,
        metrics: Metrics | None = None,
    ) -> None:
        if name not in (HAPPY_END, ERROR_END):
            raise ValueError(f"end actor must be '{HAPPY_END}' or '{ERROR_END}', got '{name}'")
        self.name = name
        self._transport = transport
        self._sink = sink
        self._records = transport.records
        self._kind = RECORD_KINDS[name]
        self._clock = clock
        self._rng = rng
        self._metrics = metrics
        self.loop = MessageLoop(
            transport,
            name,
            OnePhase(self.handle),
            concurrency=concurrency,
            hooks=combined(metrics=metrics),
        )

    async def start(self) -> None:
        """Declare this end's log of records, then consume.

        Raises:
            SettingsError: the broker cannot keep the records (see `RecordStore.declare`).
        """
        await self.declare()
        await self.loop.start()

    async def declare(self) -> None:
        """Declare this end's log of records (`start` does, before consuming).

        Raises:
            SettingsError: the broker cannot keep the records (see `RecordStore.declare`).
        """
        await self._records.declare(self._kind)

    async def stop(self, grace_s: float) -> None:
        await self.loop.stop(grace_s)

    async def handle(self, messages: Sequence[Message]) -> list[Settle]:
        return [await self._finish(message) for message in messages]

    async def _finish(self, message: Message) -> Settle:
        try:
            envelope = self._final_envelope(message)
            if envelope is None:
                return Settle.ACK
            await self._keep(envelope, message)
        except TransportError as exc:
            log.warning(
                "final envelope not recorded; back to the queue",
                extra={"actor": self.name, "error": str(exc)},
            )
            return Settle.REQUEUE
        return Settle.ACK

    def _final_envelope(self, message: Message) -> Envelope | None:
        """The envelope to record, with the reason it arrived when it brings none."""
        now = self._clock.now()
        try:
            envelope = decode_envelope(message.body, END_LIMITS)
        except EnvelopeError as exc:
            how = f" (dead-lettered: {message.death.reason.value})" if message.death else ""
            return plan_malformed(
                message.body,
                Rejection(Reason.MALFORMED_ENVELOPE, f"reached {self.name}{how}: {exc}"),
                actor=self.name,
                envelope_id=new_envelope_id(now, self._rng),
                now=now,
            ).envelope
        if self.name == ERROR_END:
            rejection = arrival_rejection(envelope, message.death)
            if rejection is not None:
                envelope = plan_rejection(envelope, rejection, now).envelope
        return envelope

    async def _keep(self, envelope: Envelope, message: Message) -> None:
        """Record at this end (a malformed arrival at happy-end is sent on to error-end).

        Raises:
            TransportError: the record was not confirmed, or the broker took neither the
                forward to error-end nor the parked message.
        """
        if self.name == HAPPY_END and envelope.status.phase is Phase.FAILED:
            try:
                await self._transport.publish(
                    ERROR_END, encode_envelope(envelope, END_LIMITS, checked=True)
                )
                return
            except UnknownActorError:
                await self._park(message, f"{ERROR_END} has no queue")
                return
        try:
            body = encode_envelope(envelope, END_LIMITS, checked=True)  # decoded from JSON
        except EnvelopeError as exc:
            await self._park(message, f"{self.name} could not encode its record: {exc}")
            return
        # The record first, confirmed: only then may the message be acked (see the docstring).
        await self._records.append(self._kind, body)
        try:
            await self._sink.record(envelope)
        except Exception as exc:  # the sink is a boundary: whatever it raised, park, never drop
            log.error("sink failed; message parked", extra={"actor": self.name, "error": repr(exc)})
            await self._park(message, f"{self.name} could not record it: {exc!r}")
            return
        if self._metrics is not None:
            reason = envelope.status.reason
            self._metrics.arrived(self.name, "" if reason is None else reason.value)
        await self._reply(envelope, body)

    async def _park(self, message: Message, reason: str) -> None:
        await self._transport.park(message.body, reason=reason)

    async def _reply(self, envelope: Envelope, body: bytes) -> None:
        reply_to = envelope.headers.get(REPLY_TO_HEADER)
        if not reply_to:
            return
        if not self._transport.is_reply_queue(reply_to):
            log.warning(
                "reply_to refused: not a reply queue a client declared",
                extra={"actor": self.name, "envelope_id": envelope.id, "reply_to": reply_to[:300]},
            )
            return
        try:
            await self._transport.publish_reply(reply_to, body)
        except (ValueError, TransportError) as exc:  # a reply is a courtesy: the record is kept
            log.warning(
                "reply not sent",
                extra={"actor": self.name, "envelope_id": envelope.id, "error": str(exc)},
            )
