"""The end actors: where every envelope's journey is recorded and answered.

`happy-end` and `error-end` consume their queues like any actor, hand each final envelope to a
`Sink` (the local runner prints and counts; the sidecar will store), send it to the `reply_to`
queue if the envelope names one, and ack. Nothing is refused: bytes that are not an envelope
are wrapped with their reason and recorded at `error-end` too.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol

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
from asya.errors import EnvelopeError
from asya.message_loop import MessageLoop
from asya.routing import ERROR_END, HAPPY_END, Rejection, plan_malformed, plan_rejection
from asya.transport.base import Message, Transport


class Sink(Protocol):
    """Where final envelopes are kept."""

    async def record(self, envelope: Envelope) -> None: ...


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
    ) -> None:
        if name not in (HAPPY_END, ERROR_END):
            raise ValueError(f"end actor must be '{HAPPY_END}' or '{ERROR_END}', got '{name}'")
        self.name = name
        self._transport = transport
        self._sink = sink
        self._clock = clock
        self._rng = rng
        self.loop = MessageLoop(transport, name, self.handle, concurrency=concurrency)

    async def start(self) -> None:
        await self.loop.start()

    async def stop(self, grace_s: float) -> None:
        await self.loop.stop(grace_s)

    async def handle(self, messages: Sequence[Message]) -> None:
        for message in messages:
            await self._finish(message)
            await self._transport.ack(message)

    async def _finish(self, message: Message) -> None:
        try:
            envelope = decode_envelope(message.body, END_LIMITS)
        except EnvelopeError as exc:
            now = self._clock.now()
            wrapped = plan_malformed(
                message.body,
                Rejection(Reason.MALFORMED_ENVELOPE, f"reached {self.name}: {exc}"),
                actor=self.name,
                envelope_id=new_envelope_id(now, self._rng),
                now=now,
            )
            if self.name == HAPPY_END:
                await self._transport.publish(
                    ERROR_END, encode_envelope(wrapped.envelope, END_LIMITS)
                )
                return
            envelope = wrapped.envelope
        if self.name == ERROR_END and envelope.status.phase is not Phase.FAILED:
            # No actor decided this: the broker dead-lettered it past the delivery limit.
            envelope = plan_rejection(
                envelope,
                Rejection(
                    Reason.DELIVERY_LIMIT_EXCEEDED,
                    "redelivered past the queue's delivery limit: it kept crashing the consumer",
                ),
                self._clock.now(),
            ).envelope
        await self._sink.record(envelope)
        reply_to = envelope.headers.get(REPLY_TO_HEADER)
        if reply_to:
            await self._transport.publish_reply(reply_to, message.body)
