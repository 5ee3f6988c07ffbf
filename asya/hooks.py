"""Hooks: what the message chain tells the world about its work, as one object.

The chain (`asya.message_loop`, `asya.consumer`) calls the methods of one `Hooks` at fixed
points: messages taken and released, an envelope's arrival, each publish pending its confirm,
each finished step. Every method does nothing here, so the chain calls them unconditionally
and a hook overrides only what it needs (as Dramatiq's middleware). Tracing (`TracingHooks`),
metrics (`MetricsHooks`) and step observers (the local runner's statistics, the sidecar's step
events) are hooks; `combined` makes one of those a process has, so an actor without tracing
or metrics pays one empty call per point, not a branch per channel.

An envelope's trace is per envelope: `arrived` returns it (`NO_TRACE`, which changes nothing,
unless tracing is on), and the consumer carries it to the end of the step.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Final, Protocol

from asya.envelope import Envelope
from asya.metrics import EnvelopeOutcome, Metrics
from asya.outcome import Outcome
from asya.telemetry import Tracing, queue_wait_ms

log = logging.getLogger(__name__)


class StepResult(enum.StrEnum):
    """What became of one input envelope at one actor."""

    SUCCEEDED = "succeeded"
    RETRIED = "retried"
    FAILED = "failed"


class Trace(Protocol):
    """One envelope's trace through one actor's step (`asya.telemetry.ActorSpan`'s shape)."""

    def carried_by(self, envelope: Envelope) -> Envelope:
        """`envelope` as user code sees it: with this trace's context, if any."""
        ...

    def stamped(self, envelope: Envelope, now: datetime) -> Envelope:
        """An output about to be published, with this trace's context and the time it leaves."""
        ...

    def rejected(self, reason: str) -> None:
        """The envelope went to `error-end` before user code ran."""
        ...

    def called(self, envelope: Envelope, outcome: Outcome, delay_ms: int | None) -> None:
        """What the call did."""
        ...

    def end(self, outcome: str) -> None:
        """The step is over (`succeeded`, `retried`, `failed`, `requeued`, `interrupted`);
        later calls do nothing."""
        ...

    @property
    def is_recording(self) -> bool:
        """Whether stamping outputs changes them (the consumer skips it when not)."""
        ...


class _NoTrace:
    """The trace of an envelope nobody traces: changes nothing, records nothing."""

    __slots__ = ()

    def carried_by(self, envelope: Envelope) -> Envelope:
        return envelope

    def stamped(self, envelope: Envelope, now: datetime) -> Envelope:
        return envelope

    def rejected(self, reason: str) -> None:
        return None

    def called(self, envelope: Envelope, outcome: Outcome, delay_ms: int | None) -> None:
        return None

    def end(self, outcome: str) -> None:
        return None

    @property
    def is_recording(self) -> bool:
        return False


NO_TRACE: Final[Trace] = _NoTrace()


class Hooks:
    """The chain's hooks; each does nothing here (see the module docstring)."""

    def taken(self, actor: str, count: int, *, redelivered: int) -> None:
        """`count` messages were handed to the handler (`redelivered` of them redelivered)."""

    def released(self, actor: str, count: int) -> None:
        """`count` messages handed out earlier are settled (acked or given back)."""

    def requeued(self, actor: str) -> None:
        """A message went back to its queue."""

    def arrived(self, actor: str, envelope: Envelope, now: datetime) -> Trace:
        """A valid envelope arrived at `actor`; its trace through the step."""
        return NO_TRACE

    def publishing(self, actor: str, delta: int) -> None:
        """Publishes waiting for their confirm went up (+1) or down (-1)."""

    def stepped(
        self, actor: str, result: StepResult, reason: str, duration_s: float, outputs: int
    ) -> None:
        """`actor` finished with an envelope: its result (`reason` why, unless it succeeded),
        the time from arrival to confirmed outputs, and how many envelopes it sent on
        (children, a retry, an error-end record).

        A run is over when everything fed in, plus every output beyond one per step, has
        reached an end actor. A hook that raises here does not undo the step (it is logged).
        """


NO_HOOKS: Final = Hooks()


class TracingHooks(Hooks):
    """A span per envelope and actor (`asya.telemetry`)."""

    def __init__(self, tracing: Tracing) -> None:
        self._tracing = tracing

    def arrived(self, actor: str, envelope: Envelope, now: datetime) -> Trace:
        span = self._tracing.start(envelope, actor, now)
        return NO_TRACE if span is None else span


class MetricsHooks(Hooks):
    """The chain's instruments (`asya.metrics`): what the loop holds, what it gives back, how
    long envelopes waited, how each step ended, confirms pending."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def taken(self, actor: str, count: int, *, redelivered: int) -> None:
        self._metrics.taken(actor, count, redelivered=redelivered)

    def released(self, actor: str, count: int) -> None:
        self._metrics.released(actor, count)

    def requeued(self, actor: str) -> None:
        self._metrics.requeued(actor)

    def arrived(self, actor: str, envelope: Envelope, now: datetime) -> Trace:
        waited_ms = queue_wait_ms(envelope, now)
        if waited_ms is not None:
            self._metrics.queue_waited(actor, waited_ms / 1000)
        return NO_TRACE

    def publishing(self, actor: str, delta: int) -> None:
        self._metrics.confirms_pending(actor, delta)

    def stepped(
        self, actor: str, result: StepResult, reason: str, duration_s: float, outputs: int
    ) -> None:
        self._metrics.stepped(actor, EnvelopeOutcome(result.value), reason, duration_s)


def combined(
    *hooks: Hooks | None, tracing: Tracing | None = None, metrics: Metrics | None = None
) -> Hooks:
    """One `Hooks` calling each of `hooks` (None ones left out) in order, after tracing and
    metrics when given; `NO_HOOKS` when there are none, the hook itself when there is one."""
    chosen: list[Hooks] = []
    if tracing is not None:
        chosen.append(TracingHooks(tracing))
    if metrics is not None:
        chosen.append(MetricsHooks(metrics))
    chosen.extend(h for h in hooks if h is not None and h is not NO_HOOKS)
    if not chosen:
        return NO_HOOKS
    if len(chosen) == 1:
        return chosen[0]
    return _Fanout(chosen)


class _Fanout(Hooks):
    """Several hooks as one; the trace is the one a hook made (tracing's, if it is on)."""

    def __init__(self, hooks: Sequence[Hooks]) -> None:
        self._hooks = tuple(hooks)

    def taken(self, actor: str, count: int, *, redelivered: int) -> None:
        for hook in self._hooks:
            hook.taken(actor, count, redelivered=redelivered)

    def released(self, actor: str, count: int) -> None:
        for hook in self._hooks:
            hook.released(actor, count)

    def requeued(self, actor: str) -> None:
        for hook in self._hooks:
            hook.requeued(actor)

    def arrived(self, actor: str, envelope: Envelope, now: datetime) -> Trace:
        trace = NO_TRACE
        for hook in self._hooks:
            made = hook.arrived(actor, envelope, now)
            if made is not NO_TRACE:
                trace = made
        return trace

    def publishing(self, actor: str, delta: int) -> None:
        for hook in self._hooks:
            hook.publishing(actor, delta)

    def stepped(
        self, actor: str, result: StepResult, reason: str, duration_s: float, outputs: int
    ) -> None:
        for hook in self._hooks:
            try:
                hook.stepped(actor, result, reason, duration_s, outputs)
            except Exception:  # one hook failing must not keep the step from the others
                log.exception("step hook failed", extra={"actor": actor})
