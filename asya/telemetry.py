"""Tracing: one OpenTelemetry trace per envelope tree, a span per actor call.

Owns everything that touches OpenTelemetry; nothing else in asya imports it. The W3C trace
context travels in the envelope's headers (`traceparent`, `tracestate`), so a trace follows an
envelope across every hop and every process: each consumer continues the trace it receives,
writes its own span's context into what it publishes, and stamps `published_at` (its clock's
time when it hands the outputs to the broker) so the next hop can tell how long the envelope
waited in its queue. A fan-out child's first span is a child of the span that yielded it (one
trace per call, the tree of spans following the tree of envelopes); a retry's next attempt is a
child of the attempt that failed.

Off unless an entry point (sidecar, `asya dev`) calls `start_tracing` with an exporter named by
`OTEL_TRACES_EXPORTER`: until then `installed()` is None, OpenTelemetry is never imported and
the chain traces nothing (`asya.hooks.TracingHooks` is the only caller on the hot path). Nothing
here may fail or lose an envelope: every span operation swallows its own errors (logged once),
and a hostile `traceparent` just starts a new trace.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar

import msgspec

from asya.envelope import Envelope
from asya.errors import SettingsError
from asya.outcome import Failure, Outcome, Success
from asya.settings import TracingSettings, otel_var

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

log = logging.getLogger(__name__)

TRACEPARENT_HEADER: Final = "traceparent"
TRACESTATE_HEADER: Final = "tracestate"
PUBLISHED_AT_HEADER: Final = "published_at"
"""When the previous hop published the envelope (ISO 8601, UTC): the start of its queue wait."""

_PUBLISHED_AT_MAX_CHARS: Final = 64
"""Longer than any ISO 8601 time: a longer header is not parsed at all."""

_TRACER_NAME: Final = "asya"

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _never_raises(
    fallback: Callable[..., Any],
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """A tracing failure is logged and replaced by `fallback(*args)` (of the method's type):
    it never fails a step."""

    def wrap(method: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(method)
        def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return method(*args, **kwargs)
            except Exception:
                _log_failure_once(method.__qualname__)
                result: _R = fallback(*args)
                return result

        return guarded

    return wrap


_reported: set[str] = set()


def _log_failure_once(where: str) -> None:
    if where not in _reported:
        _reported.add(where)
        log.warning("tracing failed; the envelope goes on untraced", extra={"where": where})


def _none(*_: object) -> None:
    return None


def _envelope_unchanged(_: object, envelope: Envelope, *__: object) -> Envelope:
    return envelope


class ActorSpan:
    """The span of one call of one actor on one envelope; see the module docstring."""

    def __init__(self, span: Span, context_headers: dict[str, str]) -> None:
        self._span = span
        self._context_headers = context_headers
        self._ended = False

    @property
    def is_recording(self) -> bool:
        """Always: an ActorSpan exists only while tracing is on."""
        return True

    @_never_raises(_envelope_unchanged)
    def carried_by(self, envelope: Envelope) -> Envelope:
        """`envelope` with this span's context in its headers: user code sees it in
        `ctx.headers` (and may continue the trace), and its outputs inherit it."""
        return msgspec.structs.replace(envelope, headers=self._headers(envelope.headers))

    @_never_raises(_envelope_unchanged)
    def stamped(self, envelope: Envelope, now: datetime) -> Envelope:
        """An output about to be published: this span's context and the time it leaves."""
        headers = self._headers(envelope.headers)
        headers[PUBLISHED_AT_HEADER] = now.isoformat(timespec="microseconds")
        return msgspec.structs.replace(envelope, headers=headers)

    @_never_raises(_none)
    def rejected(self, reason: str) -> None:
        """The envelope went to `error-end` before user code ran."""
        from opentelemetry.trace import StatusCode

        self._span.set_attribute("asya.reason", reason)
        self._span.set_status(StatusCode.ERROR, reason)

    @_never_raises(_none)
    def called(self, envelope: Envelope, outcome: Outcome, delay_ms: int | None) -> None:
        """What the call did: a retry (with its delay) or a failure, and route rewrites."""
        from opentelemetry.trace import StatusCode

        span = self._span
        if isinstance(outcome, Failure):
            span.set_attribute("asya.error.type", outcome.type)
            if delay_ms is not None:
                span.add_event(
                    "asya.retry",
                    {
                        "asya.attempt": envelope.status.attempt,
                        "asya.next_attempt": envelope.status.attempt + 1,
                        "asya.delay_ms": delay_ms,
                        "asya.error.type": outcome.type,
                        "asya.reason": outcome.reason.value,
                    },
                )
            else:
                span.set_attribute("asya.reason", outcome.reason.value)
            span.set_status(StatusCode.ERROR, f"{outcome.reason.value}: {outcome.type}")
            return
        if isinstance(outcome, Success):
            _record_rewrites(span, envelope, outcome)

    def end(self, outcome: str) -> None:
        """Close the span with the step's outcome; later calls do nothing."""
        if self._ended:
            return
        self._ended = True
        try:
            self._span.set_attribute("asya.outcome", outcome)
            self._span.end()
        except Exception:
            _log_failure_once("ActorSpan.end")

    def _headers(self, headers: dict[str, str]) -> dict[str, str]:
        # Both go first: a stale or hostile tracestate must not ride along with our traceparent.
        fresh = {
            k: v for k, v in headers.items() if k not in (TRACEPARENT_HEADER, TRACESTATE_HEADER)
        }
        fresh.update(self._context_headers)
        return fresh


def _record_rewrites(span: Span, envelope: Envelope, success: Success) -> None:
    planned = envelope.route.next
    for index, output in enumerate(success.outputs, start=1):
        if output.next != planned:
            span.add_event(
                "asya.route.rewrite",
                {
                    "asya.output": index,
                    "asya.route.next.before": list(planned),
                    "asya.route.next.after": list(output.next),
                },
            )


class Tracing:
    """Starts actor spans on a tracer; built by `start_tracing`, or by a test on its own
    `TracerProvider`. Imports OpenTelemetry when built, never before."""

    def __init__(self, tracer: Tracer) -> None:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._tracer = tracer
        self._trace = trace
        self._propagator = TraceContextTextMapPropagator()

    @_never_raises(_none)
    def start(self, envelope: Envelope, actor: str, now: datetime) -> ActorSpan | None:
        """The span of `actor`'s call on `envelope`, child of the span that published it.

        A missing or unreadable `traceparent` starts a new trace; None if tracing fails.
        """
        parent = self._propagator.extract(envelope.headers)
        attributes: dict[str, Any] = {
            "asya.actor": actor,
            "asya.attempt": envelope.status.attempt,
            "asya.envelope.id": envelope.id,
        }
        if envelope.parent_id is not None:
            attributes["asya.envelope.parent_id"] = envelope.parent_id
        wait_ms = queue_wait_ms(envelope, now)
        if wait_ms is not None:
            attributes["asya.queue_wait_ms"] = wait_ms
        span = self._tracer.start_span(
            actor, context=parent, kind=self._trace.SpanKind.CONSUMER, attributes=attributes
        )
        headers: dict[str, str] = {}
        self._propagator.inject(headers, context=self._trace.set_span_in_context(span))
        return ActorSpan(span, headers)


def queue_wait_ms(envelope: Envelope, now: datetime) -> float | None:
    """How long `envelope` waited since it was published, by the publisher's clock.

    From the `published_at` header a tracing hop stamps; else from `status.updated_at` (when
    the previous hop routed it) or `status.created_at` (a client's first send). None when no
    time is known or it does not parse. Clocks of two hosts may differ: never below 0.
    """
    since: datetime | None = None
    stamp = envelope.headers.get(PUBLISHED_AT_HEADER)
    if stamp is not None and len(stamp) <= _PUBLISHED_AT_MAX_CHARS:
        try:
            since = datetime.fromisoformat(stamp)
        except ValueError:
            since = None
        if since is not None and since.tzinfo is None:
            since = None
    if since is None:
        since = envelope.status.updated_at or envelope.status.created_at
    if since is None:
        return None
    try:
        waited_s = (now - since).total_seconds()
    except (TypeError, OverflowError):
        return None
    return max(0.0, waited_s * 1000)


_installed: Tracing | None = None
_provider: TracerProvider | None = None


def installed() -> Tracing | None:
    """This process's tracing, or None when it is off (the default)."""
    return _installed


def install(tracing: Tracing | None) -> None:
    """Make `tracing` this process's (None turns it off); consumers started later use it."""
    global _installed
    _installed = tracing


def start_tracing(settings: TracingSettings, *, service_name: str) -> Tracing | None:
    """Set tracing up for this process from the `OTEL_*` settings; None when they leave it off.

    Call once, at the entry point; `stop_tracing` flushes what is left at exit.

    Raises:
        SettingsError: tracing is asked for but the `otel` extra (or the OTLP exporter) is
            not installed.
    """
    global _provider
    names = settings.exporters
    if not names:
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise _missing(settings, "OpenTelemetry is not installed") from exc
    exporters = [_exporter(name, settings) for name in names]
    resource = Resource.create({"service.name": settings.service_name or service_name})
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    _provider = provider
    tracing = Tracing(provider.get_tracer(_TRACER_NAME))
    install(tracing)
    return tracing


def stop_tracing() -> None:
    """Flush and close what `start_tracing` set up; tracing is off afterwards."""
    global _provider
    install(None)
    provider, _provider = _provider, None
    if provider is not None:
        try:
            provider.shutdown()
        except Exception:
            log.warning("spans could not all be exported at exit", exc_info=True)


def _exporter(name: str, settings: TracingSettings) -> SpanExporter:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        # stderr, one line a span: stdout carries `asya dev`'s finals and the step events.
        return ConsoleSpanExporter(out=sys.stderr, formatter=_one_line)
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise _missing(settings, "the OTLP exporter is not installed") from exc
    return OTLPSpanExporter()


def _one_line(span: Any) -> str:
    return f"{span.to_json(indent=None)}\n"


def _missing(settings: TracingSettings, what: str) -> SettingsError:
    variable = otel_var("traces_exporter")
    return SettingsError(
        f"{variable}={settings.traces_exporter!r} turns tracing on but {what}:"
        " pip install 'asya[otel]', or unset it to run without tracing",
        variable=variable,
        value=settings.traces_exporter,
    )
