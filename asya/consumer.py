"""The actor chain: decode → check → invoke → route → publish (confirmed) → settle.

One `Consumer` is one replica of one actor: the two-phase handler of a `MessageLoop` that its
owner (the sidecar, the local runner's mesh) builds with `MessageLoop.for_actor`. Its `call`
decodes and checks a batch and calls the handler through an `Invoker` (the local runner calls
user code in-process, the sidecar calls the runtime over its socket; the chain is the same),
asking `asya.routing` what to do with each outcome; the `Finish` it returns carries the
decisions out: every output is published and confirmed before the loop is told to ack the
input, so a crash at any point means redelivery, never loss. Anything that is not a valid
envelope, or cannot be published as one, still ends in `error-end` with its reason. A message
whose outputs the broker would not take is given back (`Settle.REQUEUE`): that is the broker's
failure, not the envelope's. Tracing, metrics and step observers hear of each envelope through
one `asya.hooks.Hooks` (no-op by default).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

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
from asya.hooks import NO_HOOKS, NO_TRACE, Hooks, StepResult, Trace
from asya.message_loop import Finish, Settle
from asya.outcome import Failure, NotStarted, Outcome, Success, unsendable_output
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
from asya.transport.base import Message, Transport

log = logging.getLogger(__name__)


@dataclass
class _Plan:
    message: Message
    deliveries: list[Delivery]
    source: Envelope | None = None
    result: StepResult = StepResult.SUCCEEDED
    trace: Trace = NO_TRACE
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
        hooks: Hooks = NO_HOOKS,
        outputs_checked: bool = False,
    ) -> None:
        """`hooks`: what hears of each envelope (`asya.hooks.combined` of tracing, metrics and
        step observers). `outputs_checked`: the invoker's outputs hold JSON's own values only
        (a runtime's workers check each before sending it), so encoding them checks no more."""
        self.config = config
        self._transport = transport
        self._invoker = invoker
        self._limits = limits
        self._clock = clock
        self._rng = rng
        self._hooks = hooks
        self._outputs_checked = outputs_checked

    def drain(self) -> None:
        """Calls queued at the invoker and not started come back as `Settle.REQUEUE`."""
        self._invoker.drain()

    async def aclose(self) -> None:
        """Close the invoker (its loop has stopped: no call is in flight)."""
        await self._invoker.aclose()

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
        for plan in plans:  # already ended, unless the batch failed (handled again)
            plan.trace.end("interrupted")

    async def _deliver(self, plan: _Plan, started: float) -> Settle:
        """Publish a plan's outputs (stamped with its trace, when it is traced) and say how to
        settle its message."""
        trace = plan.trace
        if plan.unstarted:
            trace.end("requeued")
            return Settle.REQUEUE
        if trace.is_recording:
            now = self._clock.now()
            plan.deliveries = [
                dataclasses.replace(d, envelope=trace.stamped(d.envelope, now))
                for d in plan.deliveries
            ]
        settle = await self._publish_plan(plan, started)
        trace.end(plan.result.value if settle is Settle.ACK else "requeued")
        return settle

    async def _publish_plan(self, plan: _Plan, started: float) -> Settle:
        """Publish a plan's outputs; ack only once every one is confirmed.

        Settled here, per message, whatever happens: raising would make the loop handle the
        whole batch again, calling user code and publishing a second time for messages whose
        outputs are already confirmed.
        """
        published: list[BaseException | str | None]
        if len(plan.deliveries) == 1:  # the common case, without gather's task per output
            try:
                published = [await self._publish(plan.deliveries[0], plan.source)]
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
            if result is not None:  # an output went to error-end instead: the step failed
                plan.result, plan.reason = StepResult.FAILED, result
        duration = self._clock.monotonic() - started
        try:
            self._hooks.stepped(
                self.config.name, plan.result, plan.reason, duration, len(plan.deliveries)
            )
        except Exception:  # a hook (stats, step events) must not undo a confirmed step
            log.exception("step hook failed", extra={"actor": self.config.name})
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
        trace = self._hooks.arrived(self.config.name, envelope, now)
        rejection = check_arrival(envelope, self.config.name, now, self._limits)
        if rejection is not None:
            trace.rejected(rejection.reason.value)
            delivery = plan_rejection(envelope, rejection, now)
            return _Plan(
                message, [delivery], envelope, StepResult.FAILED, trace, rejection.reason.value
            )
        return _Plan(message, [], trace.carried_by(envelope), trace=trace)

    def _route(self, plan: _Plan, outcome: Outcome) -> None:
        envelope = plan.source
        assert envelope is not None
        if isinstance(outcome, NotStarted):
            plan.unstarted = True
            return
        now = self._clock.now()
        if isinstance(outcome, Failure) and outcome.partial is not None:
            outcome = outcome.partial  # a worker's outputs, some it could not send
        if isinstance(outcome, Success):
            plan.deliveries = plan_success(envelope, outcome, now)
            if outcome.unsendable:
                self._unsendable(plan, outcome)
            for delivery in plan.deliveries:
                if delivery.target == ERROR_END:
                    plan.result = StepResult.FAILED
                    reason = delivery.envelope.status.reason
                    plan.reason = "" if reason is None else reason.value
            plan.trace.called(envelope, outcome, None)
            return
        policy = self.config.retry
        delay = next_delay_ms(policy, outcome, envelope.status.attempt, self._rng)
        plan.trace.called(envelope, outcome, delay)
        plan.deliveries = [
            plan_failure(
                envelope, outcome, delay_ms=delay, max_attempts=policy.max_attempts, now=now
            )
        ]
        plan.result = StepResult.FAILED if delay is None else StepResult.RETRIED
        plan.reason = outcome.reason.value

    def _unsendable(self, plan: _Plan, outcome: Success) -> None:
        """Each output a worker could not send goes to `error-end` in place of its delivery,
        as the same output of an in-process call does when it is encoded."""
        bogus = 0
        for index, problem in outcome.unsendable.items():
            if not 0 <= index < len(outcome.outputs):  # each output has its delivery, in order
                bogus += 1
                continue
            failed = self._reject_output(
                plan.deliveries[index], plan.source, EnvelopeError(problem)
            )
            plan.deliveries[index] = failed
        if bogus:
            log.warning(
                "the runtime named outputs it did not return; ignored",
                extra={"actor": self.config.name, "count": bogus},
            )

    async def _publish(self, delivery: Delivery, source: Envelope | None) -> str | None:
        """Publish one delivery; one that cannot go where planned goes to `error-end`, and
        the reason it failed is returned (None: it went where planned)."""
        self._hooks.publishing(self.config.name, 1)
        try:
            return await self._publish_confirmed(delivery, source)
        finally:
            self._hooks.publishing(self.config.name, -1)

    async def _publish_confirmed(self, delivery: Delivery, source: Envelope | None) -> str | None:
        try:
            body = self._encode(delivery)
        except EnvelopeError as exc:
            rejected = self._reject_output(delivery, source, exc)
            await self._record_failure(self._encode(rejected))
            return _reason_of(rejected)
        if delivery.target == ERROR_END:
            await self._record_failure(body)
            return None  # planned: the step's result says so already
        try:
            await self._transport.publish(delivery.target, body, delay_ms=delivery.delay_ms)
        except UnknownActorError as exc:
            message = f"no actor named '{exc.actor}' (it has no queue); check the route"
            rerouted = plan_unknown_actor(delivery, message, self._clock.now())
            await self._record_failure(self._encode(rerouted))
            return _reason_of(rerouted)
        return None

    async def _record_failure(self, body: bytes) -> None:
        """Publish a failure record to `error-end`; park it if `error-end` has no queue."""
        try:
            await self._transport.publish(ERROR_END, body)
        except UnknownActorError:
            await self._transport.park(body, reason=f"{ERROR_END} has no queue")

    def _encode(self, delivery: Delivery) -> bytes:
        limits = END_LIMITS if delivery.target == ERROR_END else self._limits
        # Also an error-end record: a handler may route an output there, or name a bad actor.
        return encode_envelope(delivery.envelope, limits, checked=self._outputs_checked)

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
        failure = unsendable_output(self.config.name, exc)
        return plan_rejection(kept, Rejection(failure.reason, failure.message), self._clock.now())


def _reason_of(record: Delivery) -> str:
    reason = record.envelope.status.reason
    return "" if reason is None else reason.value
