"""The operator's Prometheus metrics, served with its liveness probe on `OperatorConfig.port`.

`prometheus-client` owns the instruments and the text exposition (a format we would otherwise
write and keep correct by hand). A registry of our own rather than the process-wide default:
only these series, and the same names whichever process imports the operator.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

REGISTRY: Final = CollectorRegistry(auto_describe=True)

RECONCILES: Final = Counter(
    "asya_operator_reconciles",
    "AsyncActor reconciliations by outcome: applied (objects applied, queues declared),"
    " degraded (a Secret or flavor missing, nothing applied), broker_unreachable (queues not"
    " declared yet), error (anything else; kopf retries).",
    ["outcome"],
    registry=REGISTRY,
)
RECONCILE_SECONDS: Final = Histogram(
    "asya_operator_reconcile_seconds",
    "Time to reconcile one AsyncActor, whatever the outcome.",
    registry=REGISTRY,
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
QUEUE_DELETIONS: Final = Counter(
    "asya_operator_queue_deletions",
    "Deleted AsyncActors' queues by outcome: deleted, kept (keepQueues), left (the broker"
    " unknown or unreachable after every try).",
    ["outcome"],
    registry=REGISTRY,
)

ADMISSION_PASSES: Final = Counter(
    "asya_operator_admission_passes",
    "Admission passes over the actors with a pool (each pool, cohort or pooled actor change).",
    registry=REGISTRY,
)
PREEMPTIONS: Final = Counter(
    "asya_operator_preemptions",
    "Times an actor's admitted replicas were cut to make room for a higher-priority one.",
    registry=REGISTRY,
)

OUTCOMES: Final = ("applied", "degraded", "broker_unreachable", "error")
for _outcome in OUTCOMES:  # every series exists from the start, at 0, for rate() and alerts
    RECONCILES.labels(outcome=_outcome)
for _outcome in ("deleted", "kept", "left"):
    QUEUE_DELETIONS.labels(outcome=_outcome)


def exposition() -> bytes:
    """Every metric above, in Prometheus' text format."""
    return generate_latest(REGISTRY)
