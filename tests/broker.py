"""Where tests find a real RabbitMQ, and how they run actors against it as pods do.

The broker: `ASYA_TEST_AMQP_URL` if set; else a RabbitMQ container (testcontainers) if a
Docker engine answers; else the local server on 127.0.0.1:5672. No mocks.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aio_pika

LOCAL_URL = "amqp://guest:guest@127.0.0.1:5672/"


@dataclass
class Broker:
    url: str
    kind: str
    """"env", "container" or "local": what restart_broker can do."""
    container: object | None = None


@contextlib.contextmanager
def find_broker() -> Iterator[Broker]:
    url = os.environ.get("ASYA_TEST_AMQP_URL")
    if url:
        yield Broker(url, "env")
        return
    if (
        shutil.which("docker")
        and subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0
    ):
        from testcontainers.rabbitmq import RabbitMqContainer

        with RabbitMqContainer("rabbitmq:3.13") as container:
            params = container.get_connection_params()
            host, port = params.host, params.port
            yield Broker(f"amqp://guest:guest@{host}:{port}/", "container", container)
        return
    yield Broker(LOCAL_URL, "local")


async def check_reachable(url: str) -> str | None:
    try:
        connection = await aio_pika.connect(url, timeout=5)
    except Exception as exc:  # any failure means: no broker for the tests
        return (
            f"no RabbitMQ at {url} ({exc!r}). Start the local server with"
            " `rabbitmq-server -detached`, or set ASYA_TEST_AMQP_URL"
        )
    await connection.close()
    return None


def restart_broker(broker: Broker) -> None:
    """Stop and start the broker under the tests' feet."""
    if broker.kind == "local":
        subprocess.run(["rabbitmqctl", "stop_app"], check=True, capture_output=True)
        subprocess.run(["rabbitmqctl", "start_app"], check=True, capture_output=True)
    elif broker.kind == "container":
        container = broker.container.get_wrapped_container()  # type: ignore[union-attr]
        container.restart()
    else:
        raise RuntimeError("cannot restart a broker given by ASYA_TEST_AMQP_URL")


def new_namespace() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


BROKER_PREFIX = "ASYA_BROKER_"
"""The broker's address and credentials: the sidecar's alone, never the runtime's."""


@dataclass
class Pod:
    """One actor as in Kubernetes: a runtime process and a sidecar process."""

    actor: str
    handler: str | None
    env: dict[str, str]
    """What both containers get."""
    socket_path: str
    sidecar_env: dict[str, str] = field(default_factory=dict)
    """What only the sidecar gets: the broker's variables."""
    runtime: asyncio.subprocess.Process | None = None
    sidecar: asyncio.subprocess.Process | None = None
    logs: list[Path] = field(default_factory=list)

    async def start_runtime(self) -> None:
        assert self.handler is not None
        self.runtime = await _spawn(
            [sys.executable, "-m", "asya.runtime"],
            {**self.env, "ASYA_HANDLER": self.handler},
            self._log("runtime"),
        )

    async def start_sidecar(self) -> None:
        self.sidecar = await _spawn(
            [sys.executable, "-m", "asya_sidecar.main"],
            {**self.env, **self.sidecar_env},
            self._log("sidecar"),
        )

    async def start(self) -> None:
        if self.handler is not None:
            await self.start_runtime()
        await self.start_sidecar()

    def _log(self, role: str) -> Path:
        path = Path(self.socket_path).with_suffix(f".{role}.log")
        self.logs.append(path)
        return path

    async def stop(self) -> None:
        for process in (self.sidecar, self.runtime):
            if process is not None and process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 20)
                except TimeoutError:
                    process.kill()
                    await process.wait()

    def output(self) -> str:
        return "\n".join(p.read_text() for p in self.logs if p.exists())


async def _spawn(argv: list[str], env: dict[str, str], log: Path) -> asyncio.subprocess.Process:
    handle = log.open("a")
    try:
        return await asyncio.create_subprocess_exec(
            *argv, env=env, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    finally:
        handle.close()


class Cluster:
    """Pods for a handler module, on one broker namespace."""

    def __init__(self, url: str, namespace: str, workdir: Path, handlers: str) -> None:
        self.url = url
        self.namespace = namespace
        self.workdir = workdir
        (workdir / "handlers_it.py").write_text(textwrap.dedent(handlers))
        self.pods: dict[str, Pod] = {}

    def pod(self, actor: str, handler: str | None, **env: str) -> Pod:
        pythonpath = os.pathsep.join([str(self.workdir), os.environ.get("PYTHONPATH", "")])
        common = {
            **{k: v for k, v in os.environ.items() if not k.startswith(BROKER_PREFIX)},
            "PYTHONPATH": pythonpath,
            "ASYA_NAMESPACE": self.namespace,
            "ASYA_ACTOR": actor,
            "ASYA_SOCKET_PATH": str(self.workdir / f"{actor}.sock"),
            "ASYA_HEALTH_PORT": "0",
            "ASYA_GRACE_S": "10",
            **{k: v for k, v in env.items() if not k.startswith(BROKER_PREFIX)},
        }
        broker = {
            "ASYA_BROKER_URL": self.url,
            **{k: v for k, v in env.items() if k.startswith(BROKER_PREFIX)},
        }
        pod = Pod(actor, handler, common, str(self.workdir / f"{actor}.sock"), broker)
        self.pods[actor] = pod
        return pod

    async def stop(self) -> None:
        await asyncio.gather(*(pod.stop() for pod in self.pods.values()))

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{pod.output()}" for name, pod in self.pods.items())


async def sweep_namespaces(url: str, used: dict[str, set[str]]) -> None:
    """Delete every queue left in `used`'s namespaces (their names from the management API
    when it answers, else every name asya gives a namespace's queues)."""
    if not used:
        return
    names = _listed_queues(url, used) or _known_queues(url, used)
    connection = await aio_pika.connect(url)
    async with connection:
        for name in sorted(names):
            channel = await connection.channel()
            with contextlib.suppress(aio_pika.exceptions.AMQPException):
                await channel.queue_delete(name)
            if not channel.is_closed:
                await channel.close()


def _listed_queues(url: str, used: dict[str, set[str]]) -> set[str]:
    amqp = urllib.parse.urlsplit(url)
    vhost = urllib.parse.quote(urllib.parse.unquote(amqp.path[1:]) or "/", safe="")
    request = urllib.request.Request(
        f"http://{amqp.hostname}:15672/api/queues/{vhost}?columns=name",
        headers={
            "Authorization": "Basic "
            + base64.b64encode(
                f"{amqp.username or 'guest'}:{amqp.password or 'guest'}".encode()
            ).decode()
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            listed = {q["name"] for q in json.load(answer)}
    except (OSError, ValueError):
        return set()
    # Old names (asya-NS-ACTOR) too: the migration tests make them.
    prefixes = tuple(p for ns in used for p in (f"asya.{ns}.", f"asya-{ns}-", f"asya-{ns}."))
    return {name for name in listed if name.startswith(prefixes)}


def _known_queues(url: str, used: dict[str, set[str]]) -> set[str]:
    from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
    from asya.transport.records import RecordKind, records_stream_name

    names: set[str] = set()
    for namespace, actors in used.items():
        transport = RabbitMQTransport(url, RabbitMQOptions(namespace=namespace))
        for actor in {*actors, "happy-end", "error-end"}:
            names.update(transport.queues_of(actor))
        names.add(transport.parking_queue)
        names.update(records_stream_name(namespace, kind) for kind in RecordKind)
    return names
