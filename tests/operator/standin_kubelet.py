"""A test-only kubelet: each replica of a Deployment or StatefulSet in the emulator becomes real
local processes.

Test-only: part of the cluster stand-in, never shipped. It watches Deployments and StatefulSets
through the emulator's API (real WATCH streams, as a kubelet or a controller does), keeps
`spec.replicas` pods running per workload, probes them, and merge-patches the workload's
`status` (`replicas`, `readyReplicas`, `availableReplicas`, `observedGeneration`). A
StatefulSet's pods are `<name>-<ordinal>`, carry the `apps.kubernetes.io/pod-index` label, and
scaling down stops the highest ordinals first, as Kubernetes' StatefulSet controller does.

How a pod is mapped onto this machine (the "image" is this venv; `image` is ignored):
- **command**: `python` is `sys.executable`; any other command (`asya-sidecar`) is the script of
  that name beside `sys.executable` (the venv's `bin/`). `args` follow as given.
- **env**: exactly the container's `env`: `value`s; `secretKeyRef` read from the emulator's
  Secret (`data`, base64); `fieldRef` for `metadata.name`/`metadata.namespace` (the pod's),
  `metadata.labels['...']` (the pod's labels: the template's, plus a StatefulSet pod's index)
  and `status.podIP` (127.0.0.1). The only additions are the image's own: `PATH`, `HOME`, `LANG`
  from this process, and `PYTHONPATH` = `image_paths` (the test's handler dirs) plus this
  process's `PYTHONPATH`. Nothing else leaks from the test's environment. `envFrom` is not
  supported (a clear error).
- **volumes**: each `emptyDir` is a directory `<root>/<pod>/<volume>` (root: a short temp dir,
  since a Unix socket path must stay under 108 bytes). A container's `mountPath` is rewritten
  to that directory in every env value that starts with it, so `ASYA_SOCKET_PATH=
  /var/run/asya/asya-runtime.sock` becomes `<root>/<pod>/asya-socket/asya-runtime.sock`.
- **ports**: all the pod's containers share one network namespace in Kubernetes, here the
  host's: `ASYA_HEALTH_PORT` (every container's) is remapped to one free local port per pod,
  and readiness is `GET http://127.0.0.1:<that port>/readyz` (the sidecar's readinessProbe),
  every `probe_interval_s`. Exec probes (the runtime's socket ping) are not run.
- **stop**: SIGTERM to every container, SIGKILL to what is left after the pod's
  `terminationGracePeriodSeconds` (30 s, Kubernetes' default, when unset).
- **logs**: each container's stdout and stderr go to `<log_dir>/<pod>.<container>.log`.

Processes start in the pod's volume directory. A Deployment's pods are named `<deployment>-<n>`
(n counts every pod this kubelet started).

**Rollouts**, as Kubernetes' controllers do them, so that a test sees what a template change
does to the pods: each pod remembers the hash of the template it was made from. A Deployment
with `RollingUpdate` (the default) creates pods of the new template while the pods not being
stopped number under `replicas + maxSurge`, and stops old ones (not ready ones first) while
the ready pods would stay at least `replicas - maxUnavailable` (percentages of `replicas`:
surge rounded up, unavailable down; both 0 means an unavailable of 1, as Kubernetes has it);
`Recreate` stops every old pod before it starts a new one. A StatefulSet with `RollingUpdate`
(the default) replaces its highest-ordinal old pod once every pod is ready, one at a time;
with `OnDelete` it replaces none (a pod is made anew only when it is gone). A StatefulSet's
pod is made only once the pod of its name has stopped. A workload deleted and made anew under
the same name (a new uid) owns none of the old pods: they are stopped, as the garbage
collector deletes them. Every change of a
workload's pods is recorded in `history` (`Snapshot`): what a test counts pods on.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

_log = logging.getLogger(__name__)

HEALTH_PORT_ENV = "ASYA_HEALTH_PORT"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
WORKLOADS = {"Deployment": "deployments", "StatefulSet": "statefulsets"}
"""The kinds whose pods this kubelet runs, and their plural in the API's paths."""
DEFAULT_GRACE_S = 30
_IMAGE_ENV = ("PATH", "HOME", "LANG")


@dataclass
class Pod:
    """One replica: its containers' processes, its volume dirs and its health port."""

    name: str
    namespace: str
    dir: Path
    health_port: int
    grace_s: float
    labels: dict[str, str] = field(default_factory=dict)
    processes: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    ready: bool = False
    template: str = ""
    """The hash of the pod template it was made from (`template_hash`)."""
    owner: str | None = None
    """The uid of the workload that made it: one made anew under the same name (a new uid)
    does not own it, and it is stopped, as Kubernetes' garbage collector deletes it."""

    def is_running(self) -> bool:
        return any(p.returncode is None for p in self.processes.values())

    async def stop(self) -> None:
        """SIGTERM every container; SIGKILL what still runs after the grace period."""
        alive = [p for p in self.processes.values() if p.returncode is None]
        for process in alive:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(self.grace_s):
                await asyncio.gather(*(p.wait() for p in alive))
        except TimeoutError:
            for process in alive:
                if process.returncode is None:
                    _log.warning("pod killed after its grace period", extra={"pod": self.name})
                    process.kill()
            await asyncio.gather(*(p.wait() for p in alive))


def template_hash(workload: dict[str, Any]) -> str:
    """A short hash of a workload's pod template: pods of one template share it."""
    encoded = json.dumps(workload["spec"]["template"], sort_keys=True).encode()
    return hashlib.sha256(encoded).hexdigest()[:12]


@dataclass(frozen=True)
class Snapshot:
    """A workload's pods after one change the kubelet made to them (a pod started or stopped):
    the pods not being stopped, by template hash, and how many are being stopped."""

    kind: str
    namespace: str
    name: str
    running: dict[str, int]
    """Template hash -> pods of it not being stopped."""
    stopping: int
    owners: dict[str, int]
    """Uid of the workload that made them -> pods not being stopped (a workload made anew
    under the same name has another)."""

    @property
    def pods(self) -> int:
        return sum(self.running.values())


def _rolling_bounds(strategy: dict[str, Any], replicas: int) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) of a RollingUpdate as pod counts, as Kubernetes resolves
    them: a percentage of `replicas`, surge rounded up and unavailable down; 0 and 0 is 0 and 1."""
    rolling = strategy.get("rollingUpdate") or {}

    def resolved(value: int | str, round_up: bool) -> int:
        if isinstance(value, int):
            return value
        share = replicas * int(value.rstrip("%")) / 100
        return math.ceil(share) if round_up else math.floor(share)

    surge = resolved(rolling.get("maxSurge", "25%"), round_up=True)
    unavailable = resolved(rolling.get("maxUnavailable", "25%"), round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


class Kubelet:
    """Runs the emulator's Deployments as local processes; an async context manager."""

    def __init__(
        self,
        server: str,
        log_dir: Path,
        *,
        image_paths: Sequence[str] = (),
        probe_interval_s: float = 0.2,
    ) -> None:
        """`server`: the emulator's URL; `image_paths`: prepended to every pod's PYTHONPATH."""
        self._server = server.rstrip("/")
        self._log_dir = log_dir
        self._image_paths = list(image_paths)
        self._probe_interval_s = probe_interval_s
        self._root = Path(tempfile.mkdtemp(prefix="kubelet-"))
        self._workloads: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._pods: dict[tuple[str, str, str], list[Pod]] = {}
        self._written: dict[tuple[str, str, str], dict[str, int]] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()
        self._synced = asyncio.Condition()
        self._session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._serial = 0
        self._started: list[asyncio.subprocess.Process] = []
        self._stopping_of: dict[tuple[str, str, str], int] = {}
        self._terminating: dict[tuple[str, str, str], set[str]] = {}
        self.history: list[Snapshot] = []
        """Every workload's pods after each change, in order (see `Snapshot`)."""

    def pods(self, namespace: str, deployment: str, kind: str = "Deployment") -> list[Pod]:
        """The running pods of a Deployment or StatefulSet (not those being stopped)."""
        return list(self._pods.get((kind, namespace, deployment), ()))

    def all_processes(self) -> list[asyncio.subprocess.Process]:
        """Every process this kubelet started that has not exited yet (pods stopping included)."""
        return [p for p in self._started if p.returncode is None]

    async def wait_until(self, done: Callable[[], bool]) -> None:
        """Wait until `done()` holds, checked after each round of syncing pods (bound it)."""
        async with self._synced:
            await self._synced.wait_for(done)

    async def stopped(self) -> None:
        """Wait until every pod being stopped (scaled away or deleted) has stopped."""
        while self._stopping:
            await asyncio.gather(*self._stopping)

    async def __aenter__(self) -> Kubelet:
        self._session = aiohttp.ClientSession()
        self._tasks = [
            *(
                asyncio.create_task(self._watch(kind), name=f"kubelet watch {kind}")
                for kind in WORKLOADS
            ),
            asyncio.create_task(self._sync_loop(), name="kubelet sync"),
        ]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        pods = [pod for pods in self._pods.values() for pod in pods]
        self._pods.clear()
        await asyncio.gather(*(pod.stop() for pod in pods), *self._stopping)
        assert self._session is not None
        await self._session.close()
        shutil.rmtree(self._root, ignore_errors=True)

    # --- the API side -------------------------------------------------------------------

    async def _watch(self, kind: str) -> None:
        # A WATCH without resourceVersion replays every object as ADDED, then streams.
        assert self._session is not None
        url = f"{self._server}/apis/apps/v1/{WORKLOADS[kind]}?watch=true"
        async with self._session.get(url, timeout=aiohttp.ClientTimeout(total=None)) as response:
            response.raise_for_status()
            async for line in response.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                body = event["object"]
                key = (kind, body["metadata"]["namespace"], body["metadata"]["name"])
                if event["type"] == "DELETED":
                    self._workloads.pop(key, None)
                else:
                    self._workloads[key] = body
                self._changed.set()

    async def _get(self, path: str) -> dict[str, Any]:
        assert self._session is not None
        async with self._session.get(f"{self._server}{path}") as response:
            response.raise_for_status()
            found: dict[str, Any] = await response.json()
            return found

    async def _patch_status(self, key: tuple[str, str, str], status: dict[str, int]) -> None:
        assert self._session is not None
        kind, namespace, name = key
        url = f"{self._server}/apis/apps/v1/namespaces/{namespace}/{WORKLOADS[kind]}/{name}"
        headers = {"Content-Type": "application/merge-patch+json"}
        for attempt in (1, 2):
            try:
                async with self._session.patch(
                    url, json={"status": status}, headers=headers
                ) as response:
                    if response.status != 404:  # deleted meanwhile: nothing to report on
                        response.raise_for_status()
                    return
            except aiohttp.ServerDisconnectedError:
                # A kept-alive connection the server closed as it was reused (aiohttp's known
                # race): once more on a fresh one, as a kubelet's client retries.
                if attempt == 2:
                    raise

    # --- the node side ------------------------------------------------------------------

    async def _sync_loop(self) -> None:
        # Woken by a Deployment event, else every probe interval (readiness is polled, as the
        # kubelet's readinessProbe is).
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._probe_interval_s):
                    await self._changed.wait()
            self._changed.clear()
            for key in list(self._pods.keys() | self._workloads.keys()):
                await self._sync(key)
            async with self._synced:
                self._synced.notify_all()

    async def _sync(self, key: tuple[str, str, str]) -> None:
        body = self._workloads.get(key)
        pods = self._pods.setdefault(key, [])
        for pod in pods:
            pod.ready = pod.is_running() and await self._is_ready(pod)
        if body is None:
            while pods:
                self._stop(key, pods, pods[-1])
            self._pods.pop(key)
            return
        for pod in [p for p in pods if p.owner != body["metadata"].get("uid")]:
            self._stop(key, pods, pod)
        if key[0] == "Deployment":
            await self._roll_deployment(key, body, pods)
        else:
            await self._roll_statefulset(key, body, pods)
        ready = sum(pod.ready for pod in pods)
        status = {
            "observedGeneration": int(body["metadata"].get("generation", 1)),
            "replicas": len(pods),
            "readyReplicas": ready,
            "availableReplicas": ready,
        }
        if self._written.get(key) != status:
            await self._patch_status(key, status)
            self._written[key] = status

    async def _roll_deployment(
        self, key: tuple[str, str, str], body: dict[str, Any], pods: list[Pod]
    ) -> None:
        wanted = int(body["spec"].get("replicas", 1))
        current = template_hash(body)
        strategy = body["spec"].get("strategy") or {}
        if strategy.get("type") == "Recreate":
            old = [p for p in pods if p.template != current]
            for pod in old:
                self._stop(key, pods, pod)
            if old or self._stopping_of.get(key):
                return  # the new pods start once every old one is gone
            surge, unavailable = 0, wanted
        else:
            surge, unavailable = _rolling_bounds(strategy, wanted)
        # Scale down first where there are more pods of the template than wanted.
        while sum(p.template == current for p in pods) > wanted:
            self._stop(key, pods, next(p for p in reversed(pods) if p.template == current))
        # Old pods that are not ready go first: they serve nothing.
        for pod in [p for p in pods if p.template != current and not p.ready]:
            self._stop(key, pods, pod)
        while True:
            old = [p for p in pods if p.template != current]
            fresh = len(pods) - len(old)
            if fresh < wanted and len(pods) < wanted + surge:
                pods.append(await self._start_pod(body, None))
                self._record(key, pods)
                continue
            ready = sum(p.ready for p in pods)
            if old and (ready - 1 >= wanted - unavailable or len(pods) > wanted + surge):
                self._stop(key, pods, old[-1])
                continue
            return

    async def _roll_statefulset(
        self, key: tuple[str, str, str], body: dict[str, Any], pods: list[Pod]
    ) -> None:
        wanted = int(body["spec"].get("replicas", 1))
        current = template_hash(body)
        while len(pods) > wanted:
            self._stop(key, pods, pods[-1])  # the highest ordinal first
        strategy = (body["spec"].get("updateStrategy") or {}).get("type", "RollingUpdate")
        old = [p for p in pods if p.template != current]
        if strategy == "RollingUpdate" and old and all(p.ready for p in pods):
            # One at a time, the highest ordinal first; made anew below under its ordinal.
            self._stop(key, pods, old[-1])
        taken = {int(p.labels[POD_INDEX_LABEL]) for p in pods}
        terminating = self._terminating.get(key, set())
        for ordinal in range(wanted):
            if ordinal not in taken and f"{key[2]}-{ordinal}" not in terminating:
                pods.append(await self._start_pod(body, ordinal))
                pods.sort(key=lambda p: int(p.labels[POD_INDEX_LABEL]))
                self._record(key, pods)

    def _stop(self, key: tuple[str, str, str], pods: list[Pod], pod: Pod) -> None:
        pods.remove(pod)
        self._stopping_of[key] = self._stopping_of.get(key, 0) + 1
        self._terminating.setdefault(key, set()).add(pod.name)

        def stopped(_task: object) -> None:
            self._stopping_of[key] -= 1
            self._terminating[key].discard(pod.name)
            self._record(key, self._pods.get(key, []))
            self._changed.set()

        task = self._stop_in_background(pod)
        task.add_done_callback(stopped)
        self._record(key, pods)

    def _record(self, key: tuple[str, str, str], pods: list[Pod]) -> None:
        running: dict[str, int] = {}
        owners: dict[str, int] = {}
        for pod in pods:
            running[pod.template] = running.get(pod.template, 0) + 1
            owners[str(pod.owner)] = owners.get(str(pod.owner), 0) + 1
        self.history.append(Snapshot(*key, running, self._stopping_of.get(key, 0), owners))

    def _stop_in_background(self, pod: Pod) -> asyncio.Task[None]:
        task = asyncio.create_task(pod.stop(), name=f"stop pod {pod.name}")
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)
        return task

    async def _is_ready(self, pod: Pod) -> bool:
        assert self._session is not None
        url = f"http://127.0.0.1:{pod.health_port}/readyz"
        try:
            async with self._session.get(url, timeout=aiohttp.ClientTimeout(total=1)) as response:
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    async def _start_pod(self, workload: dict[str, Any], ordinal: int | None) -> Pod:
        meta = workload["metadata"]
        template = workload["spec"]["template"]
        spec = template["spec"]
        self._serial += 1
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        if ordinal is None:
            name = f"{meta['name']}-{self._serial}"
        else:
            name = f"{meta['name']}-{ordinal}"
            labels[POD_INDEX_LABEL] = str(ordinal)
        pod = Pod(
            name=name,
            namespace=meta["namespace"],
            dir=self._root / f"{name}.{self._serial}",
            health_port=_free_port(),
            grace_s=float(spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_S)),
            labels=labels,
            template=template_hash(workload),
            owner=meta.get("uid"),
        )
        volumes = {}
        for volume in spec.get("volumes", ()):
            if "emptyDir" not in volume:
                raise NotImplementedError(f"pod {name}: volume {volume} is not an emptyDir")
            volumes[volume["name"]] = pod.dir / volume["name"]
            volumes[volume["name"]].mkdir(parents=True)
        pod.dir.mkdir(parents=True, exist_ok=True)
        for container in spec["containers"]:
            env = await self._env(pod, container, volumes)
            argv = [_executable(container["command"][0]), *container["command"][1:]]
            argv += container.get("args", [])
            log = self._log_dir / f"{name}.{container['name']}.log"
            with log.open("ab") as handle:
                process = await asyncio.create_subprocess_exec(
                    *argv,
                    env=env,
                    cwd=pod.dir,
                    stdin=subprocess.DEVNULL,
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                )
            pod.processes[container["name"]] = process
            self._started.append(process)
        _log.info("pod started", extra={"pod": name})
        return pod

    async def _env(
        self, pod: Pod, container: dict[str, Any], volumes: dict[str, Path]
    ) -> dict[str, str]:
        if container.get("envFrom"):
            raise NotImplementedError(f"pod {pod.name}: envFrom is not supported by the stand-in")
        mounts = {m["mountPath"]: volumes[m["name"]] for m in container.get("volumeMounts", ())}
        env = {k: os.environ[k] for k in _IMAGE_ENV if k in os.environ}
        env["PYTHONPATH"] = os.pathsep.join(
            [*self._image_paths, *filter(None, [os.environ.get("PYTHONPATH")])]
        )
        for var in container.get("env", ()):
            value = var.get("value")
            source = var.get("valueFrom")
            if source is not None:
                value = await self._value_from(pod, source)
            env[var["name"]] = _remap(str(value or ""), mounts)
        if HEALTH_PORT_ENV in env:
            env[HEALTH_PORT_ENV] = str(pod.health_port)
        return env

    async def _value_from(self, pod: Pod, source: dict[str, Any]) -> str:
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            secret = await self._get(f"/api/v1/namespaces/{pod.namespace}/secrets/{ref['name']}")
            return base64.b64decode(secret["data"][ref["key"]]).decode()
        if "fieldRef" in source:
            fields = {
                "metadata.name": pod.name,
                "metadata.namespace": pod.namespace,
                "status.podIP": "127.0.0.1",
            }
            fields |= {f"metadata.labels['{k}']": v for k, v in pod.labels.items()}
            return fields[source["fieldRef"]["fieldPath"]]
        raise NotImplementedError(f"pod {pod.name}: valueFrom {source} is not supported")


def _remap(value: str, mounts: dict[str, Path]) -> str:
    for mount_path, local in mounts.items():
        if value == mount_path or value.startswith(mount_path.rstrip("/") + "/"):
            return str(local) + value[len(mount_path.rstrip("/")) :]
    return value


def _executable(command: str) -> str:
    if command in ("python", "python3"):
        return sys.executable
    script = Path(sys.executable).parent / command
    if not script.exists():
        raise NotImplementedError(f"command {command} is not in the venv ({script.parent})")
    return str(script)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
