"""A test-only Kueue: pod groups admitted by their labels against a count of GPUs.

Test-only: part of the cluster stand-in, never shipped. kmock's emulator runs no controllers,
so each tick (`tick_s`) this does, for the namespace's StatefulSets whose pod template carries
Kueue's queue label and Deployments that carry it themselves, what the cluster's controllers
and Kueue would:

- **the StatefulSet and Deployment controllers**: a Pod per replica, `{statefulset}-{ordinal}`
  or `{deployment}-{hash}-{suffix}`, with the template's labels and annotations; pods beyond
  the replicas, or of an owner gone, are deleted;
- **Kueue's Deployment integration**: each pod of a Deployment in a queue is gated and is a
  Workload of its own, `pod-{pod}-0a1b2`, owned by it (a plain pod);
- **Kueue's pod webhook**: a Pod labelled `kueue.x-k8s.io/managed: "true"` whose parent
  suspends it (annotation `kueue.x-k8s.io/pod-suspending-parent`) is created with the
  scheduling gate `kueue.x-k8s.io/admission` and without Kueue's finalizer; any other pod is
  not Kueue's and runs at once;
- **Kueue's pod-group reconciler**: once a group's pods (label `kueue.x-k8s.io/pod-group-name`)
  number the annotation `kueue.x-k8s.io/pod-group-total-count`, a Workload of the group's
  name, owned by its pods, with a pod set per role hash (annotation
  `kueue.x-k8s.io/role-hash`); it is admitted whole, in the order Workloads were made, when
  the GPUs its pods ask for fit in `gpus` less those of the Workloads admitted before
  (conditions QuotaReserved and Admitted True, `status.admission` assigning `flavor` to the
  pod sets asking for GPUs and `cpu_flavor` to the others), else it waits with QuotaReserved
  False and a message in Kueue's words. A Workload whose pods are all gone is deleted, its
  GPUs freed (Kueue's garbage collection by owner);
- **the kubelet, once admitted**: the gate lifted, the pods Running and Ready, and each
  StatefulSet's `status.readyReplicas` what a kubelet would report.

`gpus` may be changed while it runs (the test frees quota by raising it).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp

from asya.admission.quantity import parse_quantity

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
GATE = "kueue.x-k8s.io/admission"
OWN_WORKLOAD = "standin.test/workload"
"""The stand-in's own note, on a Deployment's pod, of the Workload it made for that pod."""
MANAGED_LABEL = "kueue.x-k8s.io/managed"
PARENT_ANNOTATION = "kueue.x-k8s.io/pod-suspending-parent"
ROLE_ANNOTATION = "kueue.x-k8s.io/role-hash"
GPU = "nvidia.com/gpu"


class Kueue:
    """The stand-in; an async context manager. `workloads_made` lists each Workload it made."""

    def __init__(
        self,
        server: str,
        namespace: str,
        *,
        gpus: int,
        flavor: str = "gpu",
        cpu_flavor: str = "cpu",
        tick_s: float = 0.1,
    ) -> None:
        self._server = server.rstrip("/")
        self._namespace = namespace
        self.gpus = gpus
        self._flavor = flavor
        self._cpu_flavor = cpu_flavor
        self._tick_s = tick_s
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self.workloads_made: list[str] = []

    async def __aenter__(self) -> Kueue:
        self._session = aiohttp.ClientSession()
        self._task = asyncio.create_task(self._loop(), name="kueue stand-in")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        assert self._session is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._session.close()

    async def _loop(self) -> None:
        while True:
            await self._tick()
            await asyncio.sleep(self._tick_s)

    async def _tick(self) -> None:
        ns = self._namespace
        sets = (await self._get(f"/apis/apps/v1/namespaces/{ns}/statefulsets"))["items"]
        queued = {
            s["metadata"]["name"]: s
            for s in sets
            if QUEUE_LABEL in (s["spec"]["template"]["metadata"].get("labels") or {})
        }
        deployments = (await self._get(f"/apis/apps/v1/namespaces/{ns}/deployments"))["items"]
        queued |= {
            d["metadata"]["name"]: d
            for d in deployments
            if QUEUE_LABEL in (d["metadata"].get("labels") or {})
        }
        pods = (await self._get(f"/api/v1/namespaces/{ns}/pods"))["items"]
        await self._sync_pods(queued, pods)
        pods = (await self._get(f"/api/v1/namespaces/{ns}/pods"))["items"]
        await self._admit(queued, pods)

    async def _sync_pods(self, queued: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        ns = self._namespace
        have = {p["metadata"]["name"] for p in pods}
        wanted: set[str] = set()
        for name, owner in queued.items():
            template = owner["spec"]["template"]
            plain = owner["kind"] == "Deployment"
            for ordinal in range(int(owner["spec"]["replicas"])):
                pod = f"{name}-6d4cf56db6-{ordinal:05d}" if plain else f"{name}-{ordinal}"
                wanted.add(pod)
                if pod in have:
                    continue
                body = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": pod,
                        "namespace": ns,
                        "labels": {**template["metadata"]["labels"], "owner-set": name},
                        "annotations": dict(template["metadata"].get("annotations") or {}),
                    },
                    "spec": dict(template["spec"]),
                    "status": {"phase": "Pending"},
                }
                labels, annotations = body["metadata"]["labels"], body["metadata"]["annotations"]
                if plain:  # Kueue's Deployment webhook marks the template: a pod of its own
                    labels[QUEUE_LABEL] = owner["metadata"]["labels"][QUEUE_LABEL]
                    labels[OWN_WORKLOAD] = f"pod-{pod}-0a1b2"  # the stand-in's bookkeeping
                    body["spec"]["schedulingGates"] = [{"name": GATE}]
                elif labels.get(MANAGED_LABEL) == "true" and annotations.get(PARENT_ANNOTATION):
                    body["spec"]["schedulingGates"] = [{"name": GATE}]
                else:  # not Kueue's: it runs at once
                    body["status"] = {"phase": "Running"}
                await self._send("POST", f"/api/v1/namespaces/{ns}/pods", body)
        for pod in pods:
            if (
                "owner-set" in pod["metadata"].get("labels", {})
                and pod["metadata"]["name"] not in wanted
            ):
                await self._send(
                    "DELETE", f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}"
                )

    async def _admit(self, queued: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        ns = self._namespace
        groups: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            labels = pod["metadata"].get("labels") or {}
            group = labels.get(GROUP_LABEL) or labels.get(OWN_WORKLOAD)
            if group is not None:
                groups.setdefault(group, []).append(pod)
        path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"
        workloads = {w["metadata"]["name"]: w for w in (await self._get(path))["items"]}
        for name in set(workloads) - set(groups):
            await self._send("DELETE", f"{path}/{name}")
            workloads.pop(name)
        for name, members in sorted(groups.items()):
            total = int(members[0]["metadata"]["annotations"].get(TOTAL_ANNOTATION, "1"))
            if name not in workloads and len(members) == total:
                body = {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "Workload",
                    "metadata": {
                        "name": name,
                        "namespace": ns,
                        "ownerReferences": [
                            {"apiVersion": "v1", "kind": "Pod", "name": p["metadata"]["name"]}
                            for p in members
                        ],
                    },
                    "spec": {
                        "queueName": members[0]["metadata"]["labels"][QUEUE_LABEL],
                        "podSets": [
                            {"name": role, "count": count, "template": {}}
                            for role, count in _roles(members).items()
                        ],
                    },
                }
                workloads[name] = await self._send("POST", path, body)
                self.workloads_made.append(name)
        used = 0
        order = sorted(workloads.values(), key=lambda w: int(w["metadata"]["resourceVersion"]))
        for workload in order:
            name = workload["metadata"]["name"]
            needs = sum(_gpus(p) for p in groups.get(name, ()))
            admitted = _admitted(workload)
            if not admitted and used + needs <= self.gpus:
                flavors = {
                    role: self._flavor if gpus else self._cpu_flavor
                    for role, gpus in _role_gpus(groups.get(name, ())).items()
                }
                await self._send("PATCH", f"{path}/{name}", _admitted_status(flavors))
                admitted = True
            elif not admitted:
                more = used + needs - self.gpus
                words = (
                    f"couldn't assign flavors to pod set main: insufficient unused quota for"
                    f" {GPU} in flavor {self._flavor}, {more} more needed"
                )
                pending = _pending_status(words)
                if workload.get("status") != pending["status"]:  # only news: each is an event
                    await self._send("PATCH", f"{path}/{name}", pending)
            if admitted:
                used += needs
                await self._run(groups.get(name, ()), queued)

    async def _run(self, pods: Any, queued: dict[str, Any]) -> None:
        ns = self._namespace
        started: set[str] = set()
        for pod in pods:
            if not pod["spec"].get("schedulingGates") and pod["status"].get("phase") == "Running":
                continue
            running = {
                "spec": {"schedulingGates": None},
                "status": {
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
            await self._send(
                "PATCH", f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}", running
            )
            started.add(pod["metadata"]["labels"]["owner-set"])
        for name in started:
            owner = queued.get(name)
            if owner is None:
                continue
            if owner["kind"] == "Deployment":  # ready: the pods admitted so far
                listing = await self._get(f"/api/v1/namespaces/{ns}/pods")
                running = [
                    p
                    for p in listing["items"]
                    if p["metadata"]["labels"].get("owner-set") == name
                    and p["status"].get("phase") == "Running"
                ]
                replicas = int(owner["spec"]["replicas"])
                ready = {"status": {"replicas": replicas, "readyReplicas": len(running)}}
                path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"
            else:
                replicas = int(owner["spec"]["replicas"])
                ready = {"status": {"replicas": replicas, "readyReplicas": replicas}}
                path = f"/apis/apps/v1/namespaces/{ns}/statefulsets/{name}"
            await self._send("PATCH", path, ready)

    async def _get(self, path: str) -> dict[str, Any]:
        return await self._send("GET", path)

    async def _send(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        assert self._session is not None
        headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
        async with self._session.request(
            method, f"{self._server}{path}", json=body, headers=headers
        ) as response:
            if method == "DELETE" and response.status == 404:
                return {}
            response.raise_for_status()
            found: dict[str, Any] = await response.json()
            return found


def _gpus(pod: dict[str, Any]) -> int:
    total = 0
    for container in pod["spec"].get("containers") or ():
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        if GPU in wanted:
            total += parse_quantity(wanted[GPU]) // 1000
    return total


def _roles(pods: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in pods:
        role = pod["metadata"]["annotations"].get(ROLE_ANNOTATION, "main")
        counts[role] = counts.get(role, 0) + 1
    return counts


def _role_gpus(pods: Any) -> dict[str, int]:
    found: dict[str, int] = {}
    for pod in pods:
        role = pod["metadata"]["annotations"].get(ROLE_ANNOTATION, "main")
        found[role] = found.get(role, 0) + _gpus(pod)
    return found


def _admitted(workload: dict[str, Any]) -> bool:
    conditions = (workload.get("status") or {}).get("conditions") or ()
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)


def _admitted_status(flavors: dict[str, str]) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": "Quota reserved in ClusterQueue team-a",
                },
                {
                    "type": "Admitted",
                    "status": "True",
                    "reason": "Admitted",
                    "message": "The workload is admitted",
                },
            ],
            "admission": {
                "clusterQueue": "team-a",
                "podSetAssignments": [
                    {"name": role, "flavors": {GPU: flavor}} for role, flavor in flavors.items()
                ],
            },
        }
    }


def _pending_status(words: str) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": words}
            ]
        }
    }
