"""`python -m bench.operator_scale`: the operator's cold start and one change, at scale.

The operator runs as a process (`asya-operator run`) against the tests' stand-in API server
(`tests.operator.emulator`, served from this process) and the real broker. N AsyncActors in
K namespaces, each with its broker Secret, are stored before the operator starts; this times:
- its cold start: seconds until every actor's status is written for its spec, and until every
  actor is Ready. No pod runs: a Deployment is given as many ready replicas as it asks for by
  this process (the process-less mode; `tests.operator.standin_kubelet` runs real processes,
  for correctness, not at this scale);
- one change among N: an actor's `maxReplicas` patched, seconds until its ScaledObject says so;
- the operator's peak RSS (its VmHWM), and the API requests it made (counted by the stand-in),
  in all and per actor, and the `TimeoutError`s in its log.

The stand-in shares the machine's cores with the operator: its time is in the figures. The
queues the operator declares are deleted at the end, through the management API (guest on
127.0.0.1:15672). Needs the dev extra (the stand-in is test code).

The broker bounds the counts: a RabbitMQ 3.10 with 1,024 file descriptors (a default
`ulimit -n`) stopped completing AMQP handshakes with about 300 quorum queues declared (its
connections waited in `file_handle_cache:obtain`), so 300 actors never became Ready here. Raise
the broker's descriptor limit before measuring more.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import aiohttp.web
import yaml
from asya_operator.api.template import GROUP, VERSION
from kmock._internal.apps import Server

from tests.operator.controller_world import (
    ACTORS,
    DEPLOYMENTS,
    SCALED_OBJECTS,
    SIDECAR_IMAGE,
    async_actor,
    condition_of,
    observed,
)
from tests.operator.emulator import Cluster, kubeconfig_for, register_crd
from tests.operator.plan_builders import KEDA_CRD_FILES, SCHEMAS

DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
MANAGEMENT_URL = "http://guest:guest@127.0.0.1:15672/"
BENCH_AGENT = "asya-bench"
"""The User-Agent of this process's own requests, which the stand-in does not count."""


class CountedCluster(Cluster):
    """The stand-in, counting the requests it serves by method and resource kind."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: collections.Counter[str] = collections.Counter()

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        if raw_request.headers.get("User-Agent") == BENCH_AGENT:
            return await super().__call__(raw_request)
        parts = [p for p in raw_request.path.split("/") if p]
        kind = parts[-1] if len(parts) % 2 == 0 or "namespaces" not in parts else parts[-2]
        watch = raw_request.query.get("watch") in ("true", "1")
        self.requests[f"{'WATCH' if watch else raw_request.method} {kind}"] += 1
        return await super().__call__(raw_request)


class ReadyMaker:
    """Gives every Deployment as many ready replicas as it asks for, without processes."""

    def __init__(self, cluster: Cluster, server: str) -> None:
        self._cluster = cluster
        self._server = server
        self._changed = asyncio.Event()
        cluster.after_write(DEPLOYMENTS, self._changed.set)

    async def run(self) -> None:
        async with aiohttp.ClientSession(headers={"User-Agent": BENCH_AGENT}) as session:
            while True:
                await self._changed.wait()
                self._changed.clear()
                for body in self._cluster.stored(DEPLOYMENTS):
                    await self._make_ready(session, body)

    async def _make_ready(self, session: aiohttp.ClientSession, body: dict[str, Any]) -> None:
        wanted = int(body["spec"].get("replicas", 1))
        generation = int(body["metadata"].get("generation", 1))
        status = {
            "observedGeneration": generation,
            "replicas": wanted,
            "readyReplicas": wanted,
            "availableReplicas": wanted,
        }
        if all((body.get("status") or {}).get(k) == v for k, v in status.items()):
            return
        meta = body["metadata"]
        url = (
            f"{self._server}/apis/apps/v1/namespaces/{meta['namespace']}/deployments/{meta['name']}"
        )
        headers = {"Content-Type": "application/merge-patch+json"}
        async with session.patch(url, json={"status": status}, headers=headers) as response:
            if response.status != 404:
                response.raise_for_status()


async def _post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> None:
    async with session.post(url, json=body) as response:
        response.raise_for_status()


def _is_ready(actor: dict[str, Any] | None) -> bool:
    return actor is not None and condition_of(actor, "Ready").get("status") == "True"


def _cpu_s(pid: int) -> float | None:
    """The process's CPU seconds so far (user and system); None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _vm_hwm_mib(pid: int) -> float | None:
    """The process's peak resident memory (VmHWM), MiB; None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def measure(count: int, namespaces: int, amqp_url: str, limit_s: float) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    spaces = [f"bench-{run}-{i}" for i in range(namespaces)]
    names = {
        ns: [f"a{i}" for i in range(count) if i % namespaces == k] for k, ns in enumerate(spaces)
    }
    actors = [(ns, name) for ns in spaces for name in names[ns]]
    async with CountedCluster() as cluster, Server(cluster) as server:
        url = str(server.url).rstrip("/")
        for crd_file in KEDA_CRD_FILES.values():
            register_crd(cluster, yaml.safe_load((SCHEMAS / crd_file).read_text(encoding="utf-8")))
        secret = {
            k: base64.b64encode(v.encode()).decode()
            for k, v in {"amqp-url": amqp_url, "management-url": MANAGEMENT_URL}.items()
        }
        async with aiohttp.ClientSession(headers={"User-Agent": BENCH_AGENT}) as session:
            for ns in spaces:
                await _post(
                    session,
                    f"{url}/api/v1/namespaces/{ns}/secrets",
                    {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "metadata": {"name": "asya-broker"},
                        "data": secret,
                    },
                )
            scaling = {"scaling": {"minReplicas": 1, "maxReplicas": 3}}
            for ns, name in actors:
                await _post(
                    session,
                    f"{url}/apis/{GROUP}/{VERSION}/namespaces/{ns}/asyncactors",
                    async_actor(name, **scaling),
                )
        ready_maker = asyncio.create_task(ReadyMaker(cluster, url).run())
        with tempfile.TemporaryDirectory() as scratch:
            kubeconfig = Path(scratch) / "kubeconfig"
            kubeconfig.write_text(json.dumps(kubeconfig_for(url)))
            log_path = Path(scratch) / "operator.log"
            env = {
                **os.environ,
                "KUBECONFIG": str(kubeconfig),
                "ASYA_OPERATOR_PORT": "0",
                "ASYA_OPERATOR_SIDECAR_IMAGE": SIDECAR_IMAGE,
            }
            env.pop("KUBERNETES_SERVICE_HOST", None)
            cluster.requests.clear()
            with log_path.open("wb") as log:
                started = time.perf_counter()
                stand_in_started = time.process_time()
                process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-c",
                    "import sys; from asya_operator.cli import main; sys.exit(main())",
                    "run",
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
                try:
                    async with asyncio.timeout(limit_s):
                        for ns, name in actors:
                            await cluster.wait_for(ACTORS, ns, name, lambda o: observed(o) == 1)
                        written = time.perf_counter() - started
                        for ns, name in actors:
                            await cluster.wait_for(ACTORS, ns, name, _is_ready)
                        ready = time.perf_counter() - started
                        operator_cpu = _cpu_s(process.pid)
                        stand_in_cpu = time.process_time() - stand_in_started
                        requests = sum(cluster.requests.values())
                        by_kind = cluster.requests.most_common(8)
                        change = await _one_change(cluster, url, *actors[len(actors) // 2])
                finally:
                    rss = _vm_hwm_mib(process.pid)
                    if process.returncode is None:
                        process.send_signal(signal.SIGTERM)
                    try:
                        code = await asyncio.wait_for(process.wait(), 60)
                    except TimeoutError:  # a stop that hangs is killed, and said so
                        process.kill()
                        code = await process.wait()
                    ready_maker.cancel()
                    await _delete_queues(spaces)
            text = log_path.read_text(errors="replace")
    return {
        "actors": count,
        "namespaces": namespaces,
        "written_s": written,
        "ready_s": ready,
        "change_s": change,
        "rss_mib": rss,
        "operator_cpu_s": operator_cpu,
        "stand_in_cpu_s": stand_in_cpu,
        "requests": requests,
        "requests_by_kind": by_kind,
        "timeouts": text.count("TimeoutError"),
        "exit": code,
    }


async def _one_change(cluster: Cluster, url: str, namespace: str, name: str) -> float:
    """Seconds from one actor's maxReplicas patched to its ScaledObject saying so."""
    patch = {"spec": {"scaling": {"minReplicas": 1, "maxReplicas": 7}}}
    headers = {"Content-Type": "application/merge-patch+json"}
    started = time.perf_counter()
    async with aiohttp.ClientSession(headers={"User-Agent": BENCH_AGENT}) as session:
        target = f"{url}/apis/{GROUP}/{VERSION}/namespaces/{namespace}/asyncactors/{name}"
        async with session.patch(target, json=patch, headers=headers) as response:
            response.raise_for_status()
    await cluster.wait_for(
        SCALED_OBJECTS,
        namespace,
        name,
        lambda o: o is not None and o["spec"].get("maxReplicaCount") == 7,
    )
    return time.perf_counter() - started


async def _delete_queues(namespaces: Sequence[str]) -> None:
    """Delete every queue of `namespaces` through the management API: it still answers when
    the broker, short of file handles, completes no AMQP handshake (see the module doc)."""
    await asyncio.to_thread(_delete_by_management, tuple(namespaces))


def _delete_by_management(namespaces: tuple[str, ...]) -> None:
    auth = {"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()}
    api = "http://127.0.0.1:15672/api/queues/%2F"
    with urllib.request.urlopen(urllib.request.Request(f"{api}?columns=name", headers=auth)) as r:
        names = [q["name"] for q in json.load(r)]
    prefixes = tuple(p for ns in namespaces for p in (f"asya.{ns}.", f"asya-{ns}."))
    for name in names:
        if name.startswith(prefixes):
            quoted = urllib.parse.quote(name, safe="")
            request = urllib.request.Request(f"{api}/{quoted}", method="DELETE", headers=auth)
            urllib.request.urlopen(request).close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.operator_scale",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--counts", default="100", help="actor counts, comma-separated (100)")
    parser.add_argument(
        "--per-namespace", type=int, default=20, help="actors per namespace (20: 100 actors in 5)"
    )
    parser.add_argument(
        "--broker",
        default=os.environ.get("ASYA_TEST_AMQP_URL", DEFAULT_AMQP_URL),
        help="the broker the actors' queues are declared on (ASYA_TEST_AMQP_URL, else local)",
    )
    parser.add_argument(
        "--limit-s", type=float, default=600.0, help="give up on a count after this long (600)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    rows = []
    print(
        "actors  namespaces  statuses written (s)  all Ready (s)  one change (s)  peak RSS (MiB)"
        "  API requests (per actor)  TimeoutErrors"
    )
    for count in [int(c) for c in args.counts.split(",") if c.strip()]:
        namespaces = max(1, count // args.per_namespace)
        row = asyncio.run(measure(count, namespaces, args.broker, args.limit_s))
        rows.append(row)
        print(
            f"{row['actors']:>6}  {row['namespaces']:>10}  {row['written_s']:>20.1f}"
            f"  {row['ready_s']:>13.1f}  {row['change_s']:>14.2f}  {row['rss_mib'] or 0:>14.0f}"
            f"  {row['requests']:>10} ({row['requests'] / count:>5.1f})"
            f"        {row['timeouts']:>13}",
            flush=True,
        )
        print(
            f"        CPU to all Ready: operator {row['operator_cpu_s'] or 0:.1f} s,"
            f" stand-in (this process) {row['stand_in_cpu_s']:.1f} s"
        )
        print(
            "        requests by kind: " + ", ".join(f"{k} {n}" for k, n in row["requests_by_kind"])
        )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
