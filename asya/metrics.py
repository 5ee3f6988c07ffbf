"""Metrics: what each actor did with its envelopes, as Prometheus instruments.

Owns the instruments and their names (docs/metrics.md lists them); nothing else in asya imports
prometheus-client, and only here. prometheus-client owns the instruments and the text
exposition (a format we would otherwise write and keep correct by hand); the sidecar serves it
on its health port, at GET /metrics. A registry of our own, per `Metrics`: only these series,
and two meshes in one process never add to each other's counts.

prometheus-client comes with the `rabbitmq` extra (the sidecar's). Without it (`pip install
asya` alone) the same instruments are kept by a few in-house counters: enough for `asya dev`'s
summary table, which reads its numbers from here, but with nothing to serve. The choice is made
once, when a `Metrics` is built.

Nothing here may fail or lose an envelope: every hook swallows its own error (logged once per
hook). Called by the consumer chain (`asya.consumer`), the message loop (`asya.message_loop`)
and the end actors (`asya.crew.ends`) as they work; read by `asya.local.report` and served by
the sidecar.
"""

from __future__ import annotations

import bisect
import enum
import functools
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, ParamSpec, Protocol, TypeVar, cast

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

log = logging.getLogger(__name__)

PROCESSING_BUCKETS_S: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
"""From a millisecond echo to a ten-minute model call."""

QUEUE_WAIT_BUCKETS_S: Final = (
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
)  # fmt: skip
"""From an idle actor's millisecond to an hour of backlog."""


class EnvelopeOutcome(enum.StrEnum):
    """The `outcome` label of `asya_envelopes_total`."""

    SUCCEEDED = "succeeded"
    RETRIED = "retried"
    """Failed, and sent back to this actor for another attempt (`reason`: the failure's)."""
    FAILED = "failed"
    """Sent to `error-end` (`reason`: why)."""
    REQUEUED = "requeued"
    """Given back to the queue unprocessed (its outputs not confirmed, or asya failed)."""


class _Count(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class _Level(_Count, Protocol):
    def dec(self, amount: float = 1) -> None: ...

    def set_function(self, f: Callable[[], float]) -> None: ...


class _Spread(Protocol):
    def observe(self, amount: float) -> None: ...


_Child = TypeVar("_Child", covariant=True)
_C = TypeVar("_C")


class _Family(Protocol[_Child]):
    def labels(self, *values: Any, **labels: Any) -> _Child: ...


@dataclass(frozen=True)
class Sample:
    """One exported value, as Prometheus names it (`asya_envelopes_total`, `…_bucket`)."""

    name: str
    labels: dict[str, str]
    value: float


_P = ParamSpec("_P")
_reported: set[str] = set()


def _never_raises(method: Callable[_P, None]) -> Callable[_P, None]:
    """A metrics failure is logged once per hook and ignored: it never fails a step."""

    @functools.wraps(method)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> None:
        try:
            method(*args, **kwargs)
        except Exception:
            if method.__qualname__ not in _reported:
                _reported.add(method.__qualname__)
                log.warning("metrics failed; the envelope goes on", exc_info=True)

    return guarded


class Metrics:
    """The instruments of one process (or one local run); see the module docstring."""

    def __init__(self) -> None:
        """prometheus-client's instruments when it is installed, else the in-house ones."""
        try:
            from prometheus_client import CollectorRegistry
        except ImportError:
            self._registry: CollectorRegistry | None = None
            self._house: list[_HouseFamily] | None = []
        else:
            self._registry = CollectorRegistry(auto_describe=True)
            self._house = None
        self._children: dict[tuple[int, tuple[str, ...]], object] = {}
        self._envelopes: _Family[_Count] = self._counter(
            "asya_envelopes",
            "Envelopes an actor finished with, by outcome (succeeded, retried, failed,"
            " requeued) and reason (the failure's, for retried and failed).",
            ("actor", "outcome", "reason"),
        )
        self._processing: _Family[_Spread] = self._histogram(
            "asya_processing_seconds",
            "From an envelope's arrival to its outputs confirmed (succeeded, retried, failed).",
            ("actor",),
            PROCESSING_BUCKETS_S,
        )
        self._queue_wait: _Family[_Spread] = self._histogram(
            "asya_queue_wait_seconds",
            "How long an envelope waited in the actor's queue (since the previous hop"
            " published it, by that hop's clock).",
            ("actor",),
            QUEUE_WAIT_BUCKETS_S,
        )
        self._inflight: _Family[_Level] = self._gauge(
            "asya_inflight", "Messages an actor holds and is working on.", ("actor",)
        )
        self._redeliveries: _Family[_Count] = self._counter(
            "asya_redeliveries",
            "Messages the broker delivered again (seen before: a crash, a requeue, a lost"
            " channel); at-least-once means their handlers may run twice.",
            ("actor",),
        )
        self._arrivals: _Family[_Count] = self._counter(
            "asya_end_arrivals",
            "Final envelopes recorded by an end actor (happy-end, error-end), by reason.",
            ("actor", "reason"),
        )
        self._runtime_up: _Family[_Level] = self._gauge(
            "asya_runtime_up",
            "1 while the sidecar's runtime answers, 0 while it is starting, lost or down.",
            ("actor",),
        )
        self._pending: _Family[_Level] = self._gauge(
            "asya_publish_pending",
            "Outputs published and not yet confirmed by the broker.",
            ("actor",),
        )
        self._gpus: Callable[[], Sequence[GpuReading]] | None = None
        if self._registry is not None:
            self._registry.register(_GpuCollector(self))

    @property
    def is_exposable(self) -> bool:
        """Whether `exposition` has anything to serve (prometheus-client is installed)."""
        return self._registry is not None

    def exposition(self) -> bytes:
        """Every series, in Prometheus' text format; empty without prometheus-client."""
        if self._registry is None:
            return b""
        from prometheus_client import generate_latest

        return generate_latest(self._registry)

    def samples(self) -> list[Sample]:
        """Every series' current value, named as exposed."""
        if self._house is not None:
            return [s for family in self._house for s in family.samples()]
        assert self._registry is not None
        return [
            Sample(s.name, dict(s.labels), s.value)
            for family in self._registry.collect()
            for s in family.samples
        ]

    def family_names(self) -> dict[str, str]:
        """Each metric's name and type (`counter`, `gauge`, `histogram`)."""
        if self._house is not None:
            return {f.name: f.kind for f in self._house}
        assert self._registry is not None
        return {family.name: family.type for family in self._registry.collect()}

    # The hooks: called as envelopes are worked on.

    @_never_raises
    def taken(self, actor: str, count: int, *, redelivered: int) -> None:
        """`count` messages are being worked on, `redelivered` of them seen before."""
        self._child(self._inflight, actor).inc(count)
        if redelivered:
            self._child(self._redeliveries, actor).inc(redelivered)

    @_never_raises
    def released(self, actor: str, count: int) -> None:
        """`count` messages are no longer worked on (settled, or given back at a stop)."""
        self._child(self._inflight, actor).dec(count)

    @_never_raises
    def requeued(self, actor: str) -> None:
        self._child(self._envelopes, actor, EnvelopeOutcome.REQUEUED.value, "").inc()

    @_never_raises
    def queue_waited(self, actor: str, waited_s: float) -> None:
        self._child(self._queue_wait, actor).observe(waited_s)

    @_never_raises
    def stepped(self, actor: str, outcome: EnvelopeOutcome, reason: str, duration_s: float) -> None:
        """An envelope finished at `actor`, its outputs confirmed."""
        self._child(self._envelopes, actor, outcome.value, reason).inc()
        self._child(self._processing, actor).observe(duration_s)

    @_never_raises
    def arrived(self, end: str, reason: str) -> None:
        """An end actor recorded a final envelope."""
        self._child(self._arrivals, end, reason).inc()

    @_never_raises
    def watch_runtime(self, actor: str, is_up: Callable[[], bool]) -> None:
        """`asya_runtime_up` reads `is_up` whenever it is scraped."""
        self._child(self._runtime_up, actor).set_function(lambda: 1.0 if is_up() else 0.0)

    def watch_gpus(self, read: Callable[[], Sequence[GpuReading]]) -> None:
        """The `asya_gpu_*` gauges read `read()` (the machine's GPUs) whenever scraped."""
        self._gpus = read

    def gpu_readings(self) -> Sequence[GpuReading]:
        """What `watch_gpus`' reader reports now; none when unset or when it fails."""
        if self._gpus is None:
            return ()
        try:
            return self._gpus()
        except Exception:  # a scrape must not fail because NVML did
            log.warning("GPU metrics could not be read", exc_info=True)
            return ()

    @_never_raises
    def confirms_pending(self, actor: str, delta: int) -> None:
        """`delta` publishes started (+1) or confirmed or failed (-1)."""
        self._child(self._pending, actor).inc(delta)

    def _child(self, family: _Family[_C], *values: str) -> _C:
        # Looked up per envelope: `labels()` checks and locks each time, a dict lookup is enough
        # (actors and reasons are few, so this stays small).
        key = (id(family), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = family.labels(*values)
        return cast(_C, child)

    # What the local summary reads.

    def step_counts(self, actor: str) -> dict[EnvelopeOutcome, int]:
        """How many envelopes `actor` finished with, by outcome (every reason together)."""
        counts = dict.fromkeys(EnvelopeOutcome, 0)
        for s in self.samples():
            if s.name == "asya_envelopes_total" and s.labels.get("actor") == actor:
                counts[EnvelopeOutcome(s.labels["outcome"])] += int(s.value)
        return counts

    def processing_quantile_s(self, actor: str, fraction: float) -> float:
        """`fraction` (0..1) of `actor`'s steps took at most this long, estimated from the
        histogram's buckets as Prometheus' `histogram_quantile` does; 0.0 for no steps."""
        buckets = [
            (float(s.labels["le"]), s.value)
            for s in self.samples()
            if s.name == "asya_processing_seconds_bucket" and s.labels.get("actor") == actor
        ]
        return histogram_quantile(fraction, sorted(buckets))

    # Building the instruments, on the backend chosen in __init__.

    def _counter(self, name: str, help_: str, labels: Sequence[str]) -> _Family[_Count]:
        if self._house is not None:
            return self._add(_HouseFamily(name, "counter", tuple(labels)))
        from prometheus_client import Counter

        return Counter(name, help_, labels, registry=self._registry)

    def _gauge(self, name: str, help_: str, labels: Sequence[str]) -> _Family[_Level]:
        if self._house is not None:
            return self._add(_HouseFamily(name, "gauge", tuple(labels)))
        from prometheus_client import Gauge

        return Gauge(name, help_, labels, registry=self._registry)

    def _histogram(
        self, name: str, help_: str, labels: Sequence[str], buckets: Sequence[float]
    ) -> _Family[_Spread]:
        if self._house is not None:
            return self._add(_HouseFamily(name, "histogram", tuple(labels), tuple(buckets)))
        from prometheus_client import Histogram

        return Histogram(name, help_, labels, registry=self._registry, buckets=buckets)

    def _add(self, family: _HouseFamily) -> _HouseFamily:
        assert self._house is not None
        self._house.append(family)
        return family


class GpuReading(Protocol):
    """One GPU as the gauges read it (`asya.gpu.GpuDevice` is one)."""

    @property
    def index(self) -> int: ...
    @property
    def uuid(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def memory_total_bytes(self) -> int: ...
    @property
    def memory_used_bytes(self) -> int: ...
    @property
    def utilization_percent(self) -> int | None: ...


class _GpuCollector:
    """The `asya_gpu_*` gauges, read at scrape time (NVML's numbers change between scrapes)."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        labels = ["uuid", "index", "name"]
        used = GaugeMetricFamily(
            "asya_gpu_memory_used_bytes", "GPU memory in use, per device.", labels=labels
        )
        total = GaugeMetricFamily(
            "asya_gpu_memory_total_bytes", "GPU memory, per device.", labels=labels
        )
        busy = GaugeMetricFamily(
            "asya_gpu_utilization_ratio",
            "Fraction of NVML's last sample period the device was busy (0 to 1).",
            labels=labels,
        )
        for device in self._metrics.gpu_readings():
            names = [device.uuid, str(device.index), device.name]
            used.add_metric(names, device.memory_used_bytes)
            total.add_metric(names, device.memory_total_bytes)
            if device.utilization_percent is not None:
                busy.add_metric(names, device.utilization_percent / 100)
        yield from (used, total, busy)


def histogram_quantile(fraction: float, buckets: Sequence[tuple[float, float]]) -> float:
    """The `fraction` quantile from cumulative `(upper bound, count)` buckets, sorted, `+Inf`
    last: linear within the bucket it falls in, the highest finite bound if it falls past
    them (Prometheus' rule); 0.0 when nothing was observed."""
    if not buckets or buckets[-1][1] <= 0:
        return 0.0
    rank = fraction * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank and count > below:
            if math.isinf(upper):
                return lower
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    return lower


@dataclass
class _HouseChild:
    """One labelled series of an in-house instrument."""

    bounds: tuple[float, ...]
    value: float = 0.0
    counts: list[int] = field(default_factory=list)
    function: Callable[[], float] | None = None

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def dec(self, amount: float = 1) -> None:
        self.value -= amount

    def set_function(self, f: Callable[[], float]) -> None:
        self.function = f

    def observe(self, amount: float) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)
        self.counts[bisect.bisect_left(self.bounds, amount)] += 1
        self.value += amount


class _HouseFamily:
    """A stand-in for a prometheus-client instrument: labels, values, samples; no export."""

    def __init__(
        self, name: str, kind: str, labelnames: tuple[str, ...], bounds: tuple[float, ...] = ()
    ) -> None:
        self.name = name
        self.kind = kind
        self._labelnames = labelnames
        self._bounds = bounds
        self._children: dict[tuple[str, ...], _HouseChild] = {}

    def labels(self, *values: Any, **labels: Any) -> _HouseChild:
        key = tuple(str(v) for v in values) or tuple(str(labels[n]) for n in self._labelnames)
        if len(key) != len(self._labelnames):
            raise ValueError(f"{self.name} takes labels {self._labelnames}, got {key}")
        return self._children.setdefault(key, _HouseChild(self._bounds))

    def samples(self) -> Iterator[Sample]:
        for key, child in self._children.items():
            labels = dict(zip(self._labelnames, key, strict=True))
            if self.kind == "counter":
                yield Sample(f"{self.name}_total", labels, child.value)
            elif self.kind == "gauge":
                value = child.function() if child.function is not None else child.value
                yield Sample(self.name, labels, value)
            else:
                yield from self._histogram_samples(labels, child)

    def _histogram_samples(self, labels: dict[str, str], child: _HouseChild) -> Iterator[Sample]:
        counts = child.counts or [0] * (len(self._bounds) + 1)
        total = 0
        for bound, count in zip((*self._bounds, math.inf), counts, strict=True):
            total += count
            le = "+Inf" if math.isinf(bound) else repr(bound)
            yield Sample(f"{self.name}_bucket", {**labels, "le": le}, float(total))
        yield Sample(f"{self.name}_count", labels, float(total))
        yield Sample(f"{self.name}_sum", labels, child.value)
