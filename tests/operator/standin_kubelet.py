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
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
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
        async with self._session.patch(url, json={"status": status}, headers=headers) as response:
            if response.status != 404:  # deleted meanwhile: nothing to report on
                response.raise_for_status()

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
        wanted = 0 if body is None else int(body["spec"].get("replicas", 1))
        while len(pods) > wanted:
            self._stop_in_background(pods.pop())  # a StatefulSet's highest ordinal first
        while len(pods) < wanted:
            assert body is not None
            ordinal = len(pods) if key[0] == "StatefulSet" else None
            pods.append(await self._start_pod(body, ordinal))
        for pod in pods:
            pod.ready = pod.is_running() and await self._is_ready(pod)
        if body is None:
            self._pods.pop(key)
            return
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

    def _stop_in_background(self, pod: Pod) -> None:
        task = asyncio.create_task(pod.stop(), name=f"stop pod {pod.name}")
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

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
