"""The operator's Prometheus metrics, served with its liveness probe on `OperatorConfig.port`.

`prometheus-client` owns the instruments and the text exposition (a format we would otherwise
write and keep correct by hand). A registry of our own rather than the process-wide default:
only these series, and the same names whichever process imports the operator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from asya.admission.quantity import parse_quantity

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
    "Admission passes (each change of a pool, cohort, pooled actor or ActorGroup, and each gang"
    " readiness deadline).",
    registry=REGISTRY,
)
PREEMPTIONS: Final = Counter(
    "asya_operator_preemptions",
    "Times an actor's admitted replicas, or a gang instance, lost their quota to a"
    " higher-priority workload.",
    registry=REGISTRY,
)
GANG_EVICTIONS: Final = Counter(
    "asya_operator_gang_evictions",
    "Gang instances evicted whole for not becoming ready within their readiness timeout.",
    registry=REGISTRY,
)

_POOL_RESOURCE: Final = ("pool", "flavor", "resource")
POOL_USAGE: Final = Gauge(
    "asya_operator_pool_usage",
    "Quota the pool's admitted replicas use, per flavor and resource (cores, bytes, GPUs).",
    _POOL_RESOURCE,
    registry=REGISTRY,
)
POOL_BORROWED: Final = Gauge(
    "asya_operator_pool_borrowed",
    "The part of a pool's usage above its nominal quota, borrowed from its cohort.",
    _POOL_RESOURCE,
    registry=REGISTRY,
)
POOL_LENT: Final = Gauge(
    "asya_operator_pool_lent",
    "The part of a pool's unused nominal quota that other members of its cohort (pools, cohorts"
    " below it) use.",
    _POOL_RESOURCE,
    registry=REGISTRY,
)
POOL_REPLICAS: Final = Gauge(
    "asya_operator_pool_replicas",
    "Replicas of a pool's actors by state: admitted (holding quota) or pending (desired,"
    " waiting for quota).",
    ("pool", "state"),
    registry=REGISTRY,
)
PENDING_SINCE: Final = Gauge(
    "asya_operator_pending_since_seconds",
    "Since when (Unix time) an actor with a pool has had desired replicas waiting for quota;"
    " absent while all are admitted. time() minus it is how long it has waited.",
    ("namespace", "actor"),
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


def record_pools(statuses: Mapping[str, Mapping[str, Any]]) -> None:
    """Set the pool gauges from the statuses an admission pass planned (every pool, each time:
    a pool or a quota that is gone loses its series)."""
    for gauge in (POOL_USAGE, POOL_BORROWED, POOL_LENT, POOL_REPLICAS):
        gauge.clear()
    for pool, status in statuses.items():
        POOL_REPLICAS.labels(pool, "admitted").set(status["admittedWorkloads"])
        POOL_REPLICAS.labels(pool, "pending").set(status["pendingWorkloads"])
        for flavor in status["flavorsUsage"]:
            for quota in flavor["resources"]:
                labels = (pool, flavor["flavor"], quota["name"])
                POOL_USAGE.labels(*labels).set(parse_quantity(quota["usage"]) / 1000)
                POOL_BORROWED.labels(*labels).set(parse_quantity(quota["borrowed"]) / 1000)
                POOL_LENT.labels(*labels).set(parse_quantity(quota["lent"]) / 1000)


def record_pending(since: Mapping[tuple[str, str], float]) -> None:
    """Set `asya_operator_pending_since_seconds` to exactly the actors waiting now."""
    PENDING_SINCE.clear()
    for (namespace, actor), started in since.items():
        PENDING_SINCE.labels(namespace, actor).set(started)
