"""Quota, borrowing, reclaim and preemption on the cluster stand-in, with real pods and broker.

Two teams share one cohort of GPUs (a count, as any resource): pool team-a and pool team-b have
one `nvidia.com/gpu` each and may lend it while idle. Each team runs a pipeline of two actors: a
CPU step without quota (`a-prep`, `b-prep`), then a GPU step that wants up to two replicas of
one GPU in its team's pool; team-a also has an urgent actor at a higher priority. The controller,
the stand-in KEDA and the stand-in kubelet run as in the single-actor headline test; the test
creates only the user's objects and sends envelopes:

1. a burst on team-a's actor while team-b is idle: KEDA asks for 2, the pool admits 1 of its
   own and borrows team-b's idle GPU (the GPU steps hold their envelopes until step 3 is
   seen, so no queue drains, and no GPU is given back, before the reclaim and the preemption
   happen: the test waits for them, not for a race against the queues);
2. a burst on team-b's actor: team-b takes its GPU back (team-a's borrowed replica is
   preempted, its pod drained);
3. envelopes for team-a's urgent actor: it preempts team-a's own lower-priority replica.

Every envelope sent reaches happy-end through its whole pipeline (read back from the
namespace's results; none fails), and a sampler checks, all along, that the replicas holding
quota never exceed the cohort's two GPUs while KEDA at times asks for more.
"""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
from typing import Any

import kubernetes
import pytest
from asya_operator.api.template import GROUP, VERSION

from asya import Client
from asya.envelope import END_LIMITS, decode_envelope
from asya.transport.records import RecordKind
from tests.operator.controller_world import async_actor, condition_of, operator_registry
from tests.operator.test_standin import (
    ACTORS,
    DEPLOYMENTS,
    WAIT_S,
    create_broker_secret,
    wait_for,
)

# Whatever runs, at every write of a Deployment or StatefulSet, fits the quota.
pytestmark = pytest.mark.usefixtures("quota_watch")

HANDLERS = """
import os
import time
from asya import actor

GATE = {gate!r}

def work(doc):
    time.sleep(0.5)
    return doc

def gated(doc):
    # The GPU steps hold their envelopes here while the gate file exists, so no queue drains
    # before the reclaim and the preemption the test waits for (bounded: never for ever).
    deadline = time.monotonic() + 120
    while os.path.exists(GATE) and time.monotonic() < deadline:
        time.sleep(0.05)
    return work(doc)

def prep(doc):
    return {**doc, "prepared": True}

a_prep = actor(name="a-prep")(prep)
b_prep = actor(name="b-prep")(lambda doc: prep(doc))
a_work = actor(name="a-work")(gated)
b_work = actor(name="b-work")(lambda doc: gated(doc))
a_urgent = actor(name="a-urgent")(lambda doc: work(doc))
"""

GPUS = 2
"""The cohort's GPUs: one per pool."""

TEAM_A, TEAM_B, URGENT = "a-work", "b-work", "a-urgent"
PREP_A, PREP_B = "a-prep", "b-prep"
PIPELINE_A, PIPELINE_B = [PREP_A, TEAM_A], [PREP_B, TEAM_B]


def pool(name: str, **preemption: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourcePool",
        "metadata": {"name": name},
        "spec": {
            "cohort": "gpus",
            "preemption": {"reclaimWithinCohort": "Any", **preemption},
            "quotas": [{"flavor": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominal": 1}]}],
        },
    }


def standin_actor(name: str, **spec: Any) -> dict[str, Any]:
    """An AsyncActor whose handler is `standin_handlers.<name with _>`."""
    handler = f"standin_handlers:{name.replace('-', '_')}"
    return async_actor(name, image="registry.example.com/standin:1", handler=handler, **spec)


def cpu_actor(name: str) -> dict[str, Any]:
    """A pipeline's first step: no pool, so no quota; from zero to one replica on demand."""
    return standin_actor(
        name,
        scaling={
            "minReplicas": 0,
            "maxReplicas": 1,
            "queueLength": 5,
            "pollingInterval": 1,
            "cooldownPeriod": 2,
        },
    )


def gpu_actor(name: str, pool_name: str, *, priority: int = 0, most: int = 2) -> dict[str, Any]:
    return standin_actor(
        name,
        pool=pool_name,
        priority=priority,
        resources={"gpus": 1},
        scaling={
            "minReplicas": 0,
            "maxReplicas": most,
            "queueLength": 2,
            "pollingInterval": 1,
            "cooldownPeriod": 2,
        },
    )


class Sampler:
    """Reads every actor of the namespace as the stand-in holds it, on each change, and keeps
    what the test asserts on: the most GPUs ever holding quota, whether KEDA ever asked for
    more than the cohort has, and every admitted count seen per actor."""

    def __init__(self, cluster: Any, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.most_held = 0
        self.most_desired = 0
        self.seen: dict[str, set[int]] = {}

    async def run(self) -> None:
        # The condition is called on every change of any AsyncActor, and never holds.
        await self.cluster.wait_for(ACTORS, self.namespace, TEAM_A, self._sample)

    def _sample(self, _changed: Any) -> bool:
        held = desired = 0
        for name in (TEAM_A, TEAM_B, URGENT):
            actor = self.cluster.current(ACTORS, self.namespace, name)
            if actor is None:
                continue
            admitted = int((actor.get("status") or {}).get("admittedReplicas") or 0)
            held += admitted
            desired += int(actor["spec"].get("replicas") or 0)
            self.seen.setdefault(name, set()).add(admitted)
        self.most_held = max(self.most_held, held)
        self.most_desired = max(self.most_desired, desired)
        return False  # never done: sample every change until cancelled


def admitted(count: int) -> Any:
    return lambda o: (
        o is not None and int((o.get("status") or {}).get("admittedReplicas") or 0) == count
    )


async def until(cluster: Any, namespace: str, name: str, condition: Any, what: str) -> Any:
    """The actor `name` once `condition` holds; on a timeout the failure shows every actor."""
    try:
        async with asyncio.timeout(WAIT_S):
            return await cluster.wait_for(ACTORS, namespace, name, condition)
    except TimeoutError:
        pytest.fail(f"not within {WAIT_S} s: {what}; actors: {_standing(cluster, namespace)}")


def preempted_by(preemptor: str) -> Any:
    def check(actor: dict[str, Any] | None) -> bool:
        preempted = condition_of(actor or {}, "Preempted")
        return preempted.get("status") == "True" and preemptor in preempted.get("message", "")

    return check


# Longer than the suite's 60 s: three phases of real pods, then some 60 envelopes at 0.5 s each
# on at most two GPUs; every wait inside is bounded on its own.
@pytest.mark.timeout(300)
async def test_two_teams_borrow_reclaim_and_preempt_gpus_and_every_envelope_is_served(
    cluster,
    kube,
    kubelet,
    keda,
    run_operator,
    transport,
    namespace,
    amqp_url,
    actor_names,
    tmp_path,
):
    gate = tmp_path / "hold-the-gpu-steps"
    gate.touch()
    handlers = textwrap.dedent(HANDLERS).replace("{gate!r}", repr(str(gate)))
    (tmp_path / "image" / "standin_handlers.py").write_text(handlers)
    actor_names.update({PREP_A, PREP_B, TEAM_A, TEAM_B, URGENT})
    custom = kubernetes.client.CustomObjectsApi(kube)

    async def create(plural: str, body: dict[str, Any], *, namespaced: bool = False) -> None:
        if namespaced:
            call = custom.create_namespaced_custom_object
            await asyncio.to_thread(call, GROUP, VERSION, namespace, plural, body)
        else:
            call = custom.create_cluster_custom_object
            await asyncio.to_thread(call, GROUP, VERSION, plural, body)

    await create_broker_secret(kube, namespace, amqp_url)
    flavor = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceFlavor",
        "metadata": {"name": "gpu"},
    }
    await create("resourceflavors", {**flavor, "spec": {}})
    await create("resourcepools", pool("team-a", withinPool="LowerPriority"))
    await create("resourcepools", pool("team-b"))
    await run_operator(operator_registry())
    await cluster.watched(ACTORS)
    for body in (
        cpu_actor(PREP_A),
        cpu_actor(PREP_B),
        gpu_actor(TEAM_A, "team-a"),
        gpu_actor(TEAM_B, "team-b"),
        gpu_actor(URGENT, "team-a", priority=10, most=1),
    ):
        await create("asyncactors", body, namespaced=True)
    for name in (PREP_A, PREP_B, TEAM_A, TEAM_B, URGENT):
        await wait_for(
            cluster,
            ACTORS,
            namespace,
            name,
            lambda o: int(((o or {}).get("status") or {}).get("observedGeneration") or 0) >= 1,
            f"{name}'s objects applied and queues declared",
        )
    sampler = Sampler(cluster, namespace)
    sampling = asyncio.create_task(sampler.run())
    client = Client(transport)
    try:
        # 1. team-b idle: team-a's actor borrows its GPU.
        sent = {await client.send(PIPELINE_A, {"n": n}) for n in range(30)}
        held = await until(cluster, namespace, TEAM_A, admitted(2), "team-a borrows")
        reserved = condition_of(held, "QuotaReserved")
        assert reserved["status"] == "True"
        assert "borrowing" in reserved["message"]

        # 2. team-b wakes: it reclaims its GPU from team-a.
        sent |= {await client.send(PIPELINE_B, {"n": n}) for n in range(12)}
        await until(cluster, namespace, TEAM_B, admitted(1), "team-b reclaims")
        reclaimed = await until(
            cluster,
            namespace,
            TEAM_A,
            preempted_by(f"{namespace}/{TEAM_B}"),
            "team-a gives its borrowed GPU back",
        )
        assert int(reclaimed["status"]["admittedReplicas"]) <= 1

        # 3. team-a's urgent actor preempts team-a's own lower-priority replica (both teams
        # still hold their envelopes: team-a has work and a replica, team-b its GPU).
        sent |= {await client.send(PIPELINE_A, {"n": n}) for n in range(30, 50)}
        sent |= {await client.send([URGENT], {"n": n}) for n in range(4)}
        await until(cluster, namespace, URGENT, admitted(1), "urgent admitted")
        preempted = await until(
            cluster,
            namespace,
            TEAM_A,
            preempted_by(f"{namespace}/{URGENT}"),
            "team-a preempted by urgent",
        )
        assert int(preempted["status"]["admittedReplicas"]) == 0

        # Every envelope is served, the preempted ones after their replicas come back.
        gate.unlink()
        results: set[str] = set()
        try:
            async with asyncio.timeout(4 * WAIT_S):
                async for record in transport.records.read(RecordKind.RESULTS, follow=True):
                    final = decode_envelope(record.body, END_LIMITS)
                    results.add(final.id)
                    if final.route.prev[0] in (PREP_A, PREP_B):  # the whole pipeline ran
                        assert final.payload["prepared"] is True
                    if sent <= results:
                        break
        except TimeoutError:
            pytest.fail(
                f"{len(sent - results)} of {len(sent)} not served: {_standing(cluster, namespace)}"
            )
        assert results == sent
        failed = [r async for r in transport.records.read(RecordKind.FAILURES)]
        assert failed == []
    finally:
        sampling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampling

    seen = f"held at most {sampler.most_held}, desired at most {sampler.most_desired}"
    assert sampler.most_held <= GPUS, f"{seen}: the cohort has {GPUS} GPUs"
    assert sampler.most_desired > GPUS, f"{seen}: KEDA never asked for more than the quota"
    assert {0, 1, 2} <= sampler.seen[TEAM_A], sampler.seen
    for name in (TEAM_A, TEAM_B, URGENT):
        deployment = await wait_for(
            cluster, DEPLOYMENTS, namespace, name, lambda o: o is not None, f"{name}'s Deployment"
        )
        assert deployment["spec"]["replicas"] <= 2


def _standing(cluster: Any, namespace: str) -> dict[str, Any]:
    """Each actor's desired, admitted and ready replicas and conditions, for a failure message."""
    standing = {}
    for name in (TEAM_A, TEAM_B, URGENT):
        actor = cluster.current(ACTORS, namespace, name) or {}
        deployment = cluster.current(DEPLOYMENTS, namespace, name) or {}
        status = actor.get("status") or {}
        standing[name] = {
            "desired": actor.get("spec", {}).get("replicas"),
            "admitted": status.get("admittedReplicas"),
            "deployment": deployment.get("spec", {}).get("replicas"),
            "ready": (deployment.get("status") or {}).get("readyReplicas"),
            "conditions": {c["type"]: c.get("message") for c in status.get("conditions") or ()},
        }
    return standing
