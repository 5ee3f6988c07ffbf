"""Small builders for the values tests are made of."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from asya.actor import ActorConfig
from asya.consumer import Consumer
from asya.envelope import Envelope, Route, Status
from asya.hooks import NO_HOOKS, Hooks
from asya.message_loop import MessageLoop
from asya.transport.base import Transport

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def envelope(
    curr: str = "a",
    next: Sequence[str] = (),
    prev: Sequence[str] = (),
    *,
    id: str = "e1",
    payload: Any = None,
    attempt: int = 1,
    deadline_at: datetime | None = None,
    headers: dict[str, str] | None = None,
    parent_id: str | None = None,
) -> Envelope:
    return Envelope(
        id=id,
        parent_id=parent_id,
        route=Route(prev=tuple(prev), curr=curr, next=tuple(next)),
        headers=dict(headers or {}),
        status=Status(attempt=attempt, created_at=T0, updated_at=T0, deadline_at=deadline_at),
        payload={"n": 1} if payload is None else payload,
    )


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime = T0) -> None:
        self._now = start
        self._mono = 0.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._mono += seconds


def rng(seed: int = 7) -> random.Random:
    return random.Random(seed)


# Admission scenarios, in the format `asya admission simulate` reads.


def pool(
    name: str,
    *,
    cohort: str | None = None,
    strategy: str = "BestEffortFIFO",
    within: str = "Never",
    reclaim: str = "Never",
    borrow_policy: str = "Never",
    threshold: int | None = None,
    namespaces: list[str] | None = None,
    **flavors: dict[str, Any],
) -> dict[str, Any]:
    """flavors: flavor name -> {resource: nominal or {nominal, borrowingLimit, lendingLimit}}."""
    quotas = [
        {
            "flavor": flavor,
            "resources": {
                resource.replace("_com_", ".com/"): q if isinstance(q, dict) else {"nominal": q}
                for resource, q in resources.items()
            },
        }
        for flavor, resources in flavors.items()
    ]
    spec: dict[str, Any] = {
        "name": name,
        "queueingStrategy": strategy,
        "preemption": {
            "withinPool": within,
            "reclaimWithinCohort": reclaim,
            "borrowWithinCohort": {"policy": borrow_policy, "maxPriorityThreshold": threshold},
        },
        "quotas": quotas,
    }
    if cohort is not None:
        spec["cohort"] = cohort
    if namespaces is not None:
        spec["namespaces"] = namespaces
    return spec


def workload(
    name: str,
    pool: str,
    *,
    priority: int = 0,
    created: int = 0,
    count: int = 1,
    min_count: int | None = None,
    admitted: str | None = None,
    namespace: str | None = None,
    **requests: Any,
) -> dict[str, Any]:
    """One pod set `main` of `count` pods, each requesting `requests`.

    Resource names: `nvidia_com_gpu` stands for `nvidia.com/gpu`.
    """
    per_pod = {r.replace("_com_", ".com/"): v for r, v in requests.items()}
    spec: dict[str, Any] = {
        "name": name,
        "pool": pool,
        "priority": priority,
        "created": created,
        "podSets": [{"name": "main", "count": count, "minCount": min_count, "requests": per_pod}],
    }
    if admitted is not None:
        spec["admitted"] = [{"podSet": "main", "flavor": admitted, "count": count}]
    if namespace is not None:
        spec["namespace"] = namespace
    return spec


class Replica:
    """One replica of an actor as the sidecar and the mesh run it: a `Consumer` (built from
    `**consumer` and `hooks`) and the `MessageLoop` that feeds it, with `depth`."""

    def __init__(
        self,
        config: ActorConfig,
        *,
        transport: Transport,
        depth: int = 0,
        hooks: Hooks = NO_HOOKS,
        **consumer: Any,
    ) -> None:
        self.consumer = Consumer(config, transport=transport, hooks=hooks, **consumer)
        self.loop = MessageLoop.for_actor(
            transport, config, self.consumer, depth=depth, hooks=hooks
        )

    async def start(self) -> None:
        await self.loop.start()

    async def stop(self, grace_s: float) -> None:
        await self.loop.stop(grace_s)
        await self.consumer.aclose()
