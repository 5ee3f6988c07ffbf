"""The actor chain: decode → check → invoke → route → publish (confirmed) → settle.

One `Consumer` is one replica of one actor. It reads messages through a `MessageLoop`, asks
`asya.routing` what to do with each, and carries the decisions out: every output is published
and confirmed before the loop is told to ack the input, so a crash at any point means
redelivery, never loss. Anything that is not a valid envelope, or cannot be published as one,
still ends in `error-end` with its reason. A message whose outputs the broker would not take
is given back (`Settle.REQUEUE`): that is the broker's failure, not the envelope's. The
handler is behind an `Invoker`: the local runner calls user code in-process, the sidecar
calls the runtime over its socket; the chain is the same. With `tracing` (`asya.telemetry`)
each decoded envelope gets a span from arrival to settle; without it, one branch per step.
With `metrics` (`asya.metrics`) each finished envelope is counted by outcome and reason, with
its processing time and queue wait, and each publish is a pending confirm until it returns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec

from asya.actor import ActorConfig
from asya.clock import Clock
from asya.envelope import (
    END_LIMITS,
    Envelope,
    Limits,
    Reason,
    decode_envelope,
    encode_envelope,
    new_envelope_id,
)
from asya.errors import EnvelopeError, PayloadTooLargeError, TransportError, UnknownActorError
from asya.handler import Invoker
from asya.message_loop import Finish, MessageLoop, Settle
from asya.metrics import EnvelopeOutcome, Metrics
from asya.outcome import NotStarted, Outcome, Success
from asya.retry import next_delay_ms
from asya.routing import (
    ERROR_END,
    Delivery,
    Rejection,
    check_arrival,
    plan_failure,
    plan_malformed,
    plan_rejection,
    plan_success,
    plan_unknown_actor,
)
from asya.telemetry import ActorSpan, Tracing, queue_wait_ms
from asya.transport.base import Message, Transport

log = logging.getLogger(__name__)


class StepResult(enum.StrEnum):
    """What became of one input envelope at one actor."""

    SUCCEEDED = "succeeded"
    RETRIED = "retried"
    FAILED = "failed"


class Observer(Protocol):
    """Told about every envelope an actor finishes with (stats, metrics, completion).

    `outputs` is how many envelopes the step sent on (children, a retry, an error-end record):
    a run is over when everything fed in, plus every output beyond one per step, has reached
    an end actor.
    """

    def on_step(self, actor: str, result: StepResult, duration_s: float, outputs: int) -> None: ...


@dataclass
class _Plan:
    message: Message
    deliveries: list[Delivery]
    source: Envelope | None = None
    result: StepResult = StepResult.SUCCEEDED
    span: ActorSpan | None = None
    reason: str = ""
    """Why it failed (or is retried): the `reason` label of its metrics."""
    unstarted: bool = False
    """The invoker drained before the call started: the message goes back untouched."""


class Consumer:
    """One replica of one actor; see the module docstring."""

    def __init__(
        self,
        config: ActorConfig,
        *,
        transport: Transport,
        invoker: Invoker,
        limits: Limits,
        clock: Clock,
        rng: random.Random,
        observer: Observer,
        tracing: Tracing | None = None,
        metrics: Metrics | None = None,
        depth: int = 0,
    ) -> None:
        """`tracing`: a span per envelope (`asya.telemetry.installed()` at the entry points);
        None = no tracing at all. `metrics`: where the chain counts what it does; None = not
        counted (the observer still hears of every step). `depth`: calls queued behind each
        running one (`ASYA_PIPELINE_DEPTH`; see `asya.message_loop`)."""
        self.config = config
        self._transport = transport
        self._invoker = invoker
        self._limits = limits
        self._clock = clock
        self._rng = rng
        self._observer = observer
        self._tracing = tracing
        self._metrics = metrics
        self.loop = MessageLoop(
            transport,
            config.name,
            self,
            concurrency=config.concurrency,
            depth=depth,
            batch=config.batch,
            batch_wait_ms=config.batch_wait_ms,
            metrics=metrics,
        )

    async def start(self) -> None:
        await self.loop.start()

    async def stop(self, grace_s: float) -> None:
        await self.loop.stop(grace_s)
        await self._invoker.aclose()

    def drain(self) -> None:
        """Calls queued at the invoker and not started come back as `Settle.REQUEUE`."""
        self._invoker.drain()

    async def call(self, messages: Sequence[Message]) -> Finish:
        """Decode, check and call the handler on a batch of messages (one, unless the actor
        batches); what is left to do (route, publish, confirm) is the returned `Finish`."""
        started = self._clock.monotonic()
        plans = [self._admit(message) for message in messages]
        try:
            callable_plans = [p for p in plans if p.source is not None and not p.deliveries]
            if callable_plans:
                envelopes = [p.source for p in callable_plans if p.source is not None]
                outcomes = await self._invoker.invoke(envelopes)
                for plan, outcome in zip(callable_plans, outcomes, strict=True):
                    self._route(plan, outcome)
        except BaseException:
            self._interrupted(plans)
            raise

        async def finish() -> Sequence[Settle]:
            try:
                return await self._finish(plans, started)
            finally:
                self._interrupted(plans)

        return finish

    async def _finish(self, plans: Sequence[_Plan], started: float) -> Sequence[Settle]:
        if len(plans) == 1:  # the common case, without gather's task per plan
            return [await self._deliver(plans[0], started)]
        # A batch's outputs are all in flight at once: each waits only for its own confirms.
        # Every delivery finishes (none left publishing unwatched) before anything is raised.
        settled = await asyncio.gather(
            *(self._deliver(p, started) for p in plans), return_exceptions=True
        )
        for result in settled:
            if isinstance(result, BaseException):
                raise result
        return [s for s in settled if isinstance(s, Settle)]

    def _interrupted(self, plans: Sequence[_Plan]) -> None:
        if self._tracing is not None:
            for plan in plans:  # already ended, unless the batch failed (handled again)
                if plan.span is not None:
                    plan.span.end("interrupted")

    async def _deliver(self, plan: _Plan, started: float) -> Settle:
        """Publish a plan's outputs (traced, when its envelope has a span) and say how to
        settle its message."""
        span = plan.span
        if plan.unstarted:
            if span is not None:
                span.end("requeued")
            return Settle.REQUEUE
        if span is None:
            return await self._publish_plan(plan, started)
        now = self._clock.now()
        plan.deliveries = [
            dataclasses.replace(d, envelope=span.stamped(d.envelope, now)) for d in plan.deliveries
        ]
        settle = await self._publish_plan(plan, started)
        span.end(plan.result.value if settle is Settle.ACK else "requeued")
        return settle

    async def _publish_plan(self, plan: _Plan, started: float) -> Settle:
        """Publish a plan's outputs; ack only once every one is confirmed.

        Settled here, per message, whatever happens: raising would make the loop handle the
        whole batch again, calling user code and publishing a second time for messages whose
        outputs are already confirmed.
        """
        published: list[BaseException | None]
        if len(plan.deliveries) == 1:  # the common case, without gather's task per output
            try:
                await self._publish(plan.deliveries[0], plan.source)
                published = [None]
            except Exception as exc:
                published = [exc]
        else:
            published = await asyncio.gather(
                *(self._publish(d, plan.source) for d in plan.deliveries), return_exceptions=True
            )
        for result in published:
            if isinstance(result, TransportError):
                log.warning(
                    "outputs not confirmed; the envelope goes back to the queue",
                    extra={"actor": self.config.name, "error": str(result)},
                )
                return Settle.REQUEUE
            if isinstance(result, Exception):
                log.error(
                    "output could not be published; the envelope goes back to the queue",
                    exc_info=result,
                    extra={"actor": self.config.name},
                )
                return Settle.REQUEUE
            if isinstance(result, BaseException):
                raise result
        duration = self._clock.monotonic() - started
        if self._metrics is not None:
            outcome = EnvelopeOutcome(plan.result.value)
            self._metrics.stepped(self.config.name, outcome, plan.reason, duration)
        try:
            self._observer.on_step(self.config.name, plan.result, duration, len(plan.deliveries))
        except Exception:  # an observer (stats, step events) must not undo a confirmed step
            log.exception("step observer failed", extra={"actor": self.config.name})
        return Settle.ACK

    def _admit(self, message: Message) -> _Plan:
        """Decode and check; a plan with deliveries already made never reaches user code."""
        now = self._clock.now()
        try:
            envelope = decode_envelope(message.body, self._limits)
        except EnvelopeError as exc:
            reason = (
                Reason.PAYLOAD_TOO_LARGE
                if isinstance(exc, PayloadTooLargeError)
                else Reason.MALFORMED_ENVELOPE
            )
            delivery = plan_malformed(
                message.body,
                Rejection(reason, str(exc)),
                actor=self.config.name,
                envelope_id=new_envelope_id(now, self._rng),
                now=now,
            )
            return _Plan(message, [delivery], result=StepResult.FAILED, reason=reason.value)
        if self._metrics is not None:
            waited_ms = queue_wait_ms(envelope, now)
            if waited_ms is not None:
                self._metrics.queue_waited(self.config.name, waited_ms / 1000)
        span = (
            None if self._tracing is None else self._tracing.start(envelope, self.config.name, now)
        )
        rejection = check_arrival(envelope, self.config.name, now, self._limits)
        if rejection is not None:
            if span is not None:
                span.rejected(rejection.reason.value)
            delivery = plan_rejection(envelope, rejection, now)
            return _Plan(
                message, [delivery], envelope, StepResult.FAILED, span, rejection.reason.value
            )
        if span is not None:
            envelope = span.carried_by(envelope)
        return _Plan(message, [], envelope, span=span)

    def _route(self, plan: _Plan, outcome: Outcome) -> None:
        envelope = plan.source
        assert envelope is not None
        if isinstance(outcome, NotStarted):
            plan.unstarted = True
            return
        now = self._clock.now()
        if isinstance(outcome, Success):
            plan.deliveries = plan_success(envelope, outcome, now)
            for delivery in plan.deliveries:
                if delivery.target == ERROR_END:
                    plan.result = StepResult.FAILED
                    reason = delivery.envelope.status.reason
                    plan.reason = "" if reason is None else reason.value
            if plan.span is not None:
                plan.span.called(envelope, outcome, None)
            return
        policy = self.config.retry
        delay = next_delay_ms(policy, outcome, envelope.status.attempt, self._rng)
        if plan.span is not None:
            plan.span.called(envelope, outcome, delay)
        plan.deliveries = [
            plan_failure(
                envelope, outcome, delay_ms=delay, max_attempts=policy.max_attempts, now=now
            )
        ]
        plan.result = StepResult.FAILED if delay is None else StepResult.RETRIED
        plan.reason = outcome.reason.value

    async def _publish(self, delivery: Delivery, source: Envelope | None) -> None:
        """Publish one delivery; one that cannot go where planned goes to `error-end`."""
        metrics = self._metrics
        if metrics is None:
            await self._publish_confirmed(delivery, source)
            return
        metrics.confirms_pending(self.config.name, 1)
        try:
            await self._publish_confirmed(delivery, source)
        finally:
            metrics.confirms_pending(self.config.name, -1)

    async def _publish_confirmed(self, delivery: Delivery, source: Envelope | None) -> None:
        try:
            body = self._encode(delivery)
        except EnvelopeError as exc:
            delivery = self._reject_output(delivery, source, exc)
            body = self._encode(delivery)
        if delivery.target == ERROR_END:
            await self._record_failure(body)
            return
        try:
            await self._transport.publish(delivery.target, body, delay_ms=delivery.delay_ms)
        except UnknownActorError as exc:
            message = f"no actor named '{exc.actor}' (it has no queue); check the route"
            rerouted = plan_unknown_actor(delivery, message, self._clock.now())
            await self._record_failure(self._encode(rerouted))

    async def _record_failure(self, body: bytes) -> None:
        """Publish a failure record to `error-end`; park it if `error-end` has no queue."""
        try:
            await self._transport.publish(ERROR_END, body)
        except UnknownActorError:
            await self._transport.park(body, reason=f"{ERROR_END} has no queue")

    def _encode(self, delivery: Delivery) -> bytes:
        limits = END_LIMITS if delivery.target == ERROR_END else self._limits
        return encode_envelope(delivery.envelope, limits)

    def _reject_output(
        self, delivery: Delivery, source: Envelope | None, exc: EnvelopeError
    ) -> Delivery:
        # Keep the input payload (which was within limits) so the failure can be replayed.
        base = delivery.envelope if source is None else source
        output = delivery.envelope
        # The output's own place in its tree (id, parent, lineage), or a client waiting for the
        # whole fan-out would count the parent's share and return before the siblings.
        kept = msgspec.structs.replace(
            base, id=output.id, parent_id=output.parent_id, lineage=output.lineage
        )
        reason = (
            Reason.PAYLOAD_TOO_LARGE
            if isinstance(exc, PayloadTooLargeError)
            else Reason.INVALID_OUTPUT
        )
        message = f"output of '{self.config.name}' cannot be sent: {exc}"
        return plan_rejection(kept, Rejection(reason, message), self._clock.now())
