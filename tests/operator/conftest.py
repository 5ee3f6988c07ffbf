"""The operator's stand-in cluster: kopf and the official client pointed at `emulator.Cluster`.

Fixtures:
- `cluster`: a running `Cluster` (asya's CRDs and the built-in kinds in discovery); the
  official `kubernetes` client and `kopf.login_via_client` reach it through a kubeconfig.
  `await cluster.wait_for(resource, namespace, name, condition)` waits for an object's state
  and `await cluster.watched(resource)` for a watcher (bound both with `asyncio.timeout`);
  `cluster.objects` holds every object and its history.
- `kube`: a `kubernetes.client.ApiClient` for it. The client is synchronous: call it through
  `asyncio.to_thread`, or it blocks the loop the cluster is served from.
- `run_operator`: `await run_operator(registry)` starts `kopf.operator()` on that registry (the
  real operator's: `controller_world.operator_registry()`) against the cluster, as a task of
  the test's loop, watching every namespace (`namespace=N`: only N, as `asya-operator run
  --namespace N`); the fixture cancels it at the end (a graceful stop costs ~5 s a test: kopf
  waits for "hung" tasks, the cluster's among them).
- `quota_watch`: the quota invariant (`quota_watch.QuotaWatch`) sampled at every Deployment
  and StatefulSet write; the test fails if any write left a cohort above its quota.
- `kubelet` and `keda`: the test-only controllers of the cluster stand-in (`standin_kubelet`,
  `standin_keda`): Deployments run as local processes, ScaledObjects scale on queue depth.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import kopf
import kubernetes
import pytest
import yaml
from asya_operator.api.template import GROUP, VERSION
from kmock._internal.apps import Server
from kubernetes.client import CustomObjectsApi

from asya.routing import ERROR_END, HAPPY_END
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
from tests.operator.controller_world import ACTORS, SIDECAR_IMAGE, World, operator_registry
from tests.operator.emulator import Cluster, kubeconfig_for, register_crd
from tests.operator.plan_builders import KEDA_CRD_FILES, SCHEMAS
from tests.operator.quota_watch import QuotaWatch
from tests.operator.standin_keda import Keda
from tests.operator.standin_kubelet import Kubelet

RunOperator = Callable[..., Awaitable[None]]


@pytest.fixture
async def cluster(tmp_path, monkeypatch) -> AsyncIterator[Cluster]:
    """A stand-in Kubernetes API server, and a kubeconfig that points at it."""
    async with Cluster() as emulator, Server(emulator) as server:
        port = server.port
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps(kubeconfig_for(str(server.url).rstrip("/"))))
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        # kubernetes.config reads $KUBECONFIG once, at import: patch its copy too.
        monkeypatch.setattr(
            kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig)
        )
        # The operator's /healthz and /metrics on a free port: tests run several operators.
        monkeypatch.setenv("ASYA_OPERATOR_PORT", "0")
        # A call left in flight when the test stops the operator (its thread outlives the
        # cancelled task) ends this soon after the stand-in goes: the loop's close waits for it.
        monkeypatch.setenv("ASYA_OPERATOR_API_TIMEOUT_S", "10")
        # Not in a pod: kopf's login must fall through to the kubeconfig.
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        # load_kube_config() sets the process-wide default Configuration; restore it after.
        monkeypatch.setattr(kubernetes.client.Configuration, "_default", None)
        kubernetes.config.load_kube_config()
        yield emulator
    await _close_connections_to(port)


async def _close_connections_to(port: int) -> None:
    """Close what is left of connections to the stand-in once it has stopped. aiohttp's
    shutdown closes the connections it tracks; one accepted while it shut down (a request a
    client the test stopped left in flight) is not among them, nor a client's end of it, and
    either would be collected unclosed later: a ResourceWarning in some other test. The loop
    turns a few times first: a connection the listening socket accepted just before it closed
    gets its transport in a task of its own (`_accept_connection2`), which must have run. And
    it turns a few times after: a transport's socket is closed in a callback `close()` only
    schedules, which a loop closed first never runs (the socket is then collected unclosed)."""
    loop = asyncio.get_running_loop()
    for _ in range(2):  # a second sweep for a connection accepted while the first one closed
        for _ in range(5):
            await asyncio.sleep(0)
        for transport in list(getattr(loop, "_transports", {}).values()):
            ends = (transport.get_extra_info("sockname"), transport.get_extra_info("peername"))
            if any(end and end[1] == port for end in ends) and not transport.is_closing():
                transport.close()
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.fixture
def kube(cluster) -> Iterator[kubernetes.client.ApiClient]:
    """The official client, configured for `cluster` (call it via `asyncio.to_thread`)."""
    with kubernetes.client.ApiClient() as api:
        yield api


@pytest.fixture
async def run_operator(cluster) -> AsyncIterator[RunOperator]:
    """Start kopf on a registry against `cluster`; it is cancelled when the test ends."""
    tasks: list[asyncio.Task[None]] = []

    async def start(registry: kopf.OperatorRegistry, *, namespace: str | None = None) -> None:
        # A registry of our own gets none of kopf's default login handlers.
        kopf.on.login(registry=registry)(kopf.login_via_client)
        settings = kopf.OperatorSettings()
        settings.peering.standalone = True  # no KopfPeering resources to coordinate through
        settings.posting.enabled = False  # no v1/events traffic in the tests
        operator = kopf.operator(
            registry=registry,
            settings=settings,
            clusterwide=namespace is None,
            namespaces=[] if namespace is None else [namespace],
        )
        tasks.append(asyncio.create_task(operator, name="kopf operator"))

    yield start
    for task in tasks:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.fixture
def quota_watch(cluster) -> Iterator[QuotaWatch]:
    """Every write of a Deployment or StatefulSet checked against the pools' quotas."""
    watch = QuotaWatch(cluster)
    yield watch
    seen = "\n".join(watch.violations)
    assert not watch.violations, f"above quota, of {watch.samples} writes sampled:\n{seen}"


@pytest.fixture
async def kubelet(kube, tmp_path) -> AsyncIterator[Kubelet]:
    """The stand-in kubelet (`standin_kubelet`) on `cluster`: Deployments become processes.

    Pods get `tmp_path / "image"` on their PYTHONPATH (write handler modules there) and log to
    `tmp_path / "pods"`. At the end every pod is stopped, and no process may be left.
    """
    image, logs = tmp_path / "image", tmp_path / "pods"
    image.mkdir()
    logs.mkdir()
    async with Kubelet(kube.configuration.host, logs, image_paths=[str(image)]) as running:
        yield running
    assert running.all_processes() == [], "the stand-in kubelet left processes running"


@pytest.fixture
async def keda(cluster, kube) -> AsyncIterator[Keda]:
    """The stand-in KEDA (`standin_keda`) on `cluster`, with KEDA's CRDs in its discovery."""
    for crd_file in KEDA_CRD_FILES.values():
        register_crd(cluster, yaml.safe_load((SCHEMAS / crd_file).read_text(encoding="utf-8")))
    async with Keda(kube.configuration.host) as running:
        yield running


# The controller's tests (test_controller*.py): a namespace with KEDA's kinds, the broker
# Secret, the operator running, and the queues their actors may leave.


@pytest.fixture
async def world(cluster, kube, namespace, monkeypatch) -> World:
    for crd_file in KEDA_CRD_FILES.values():
        register_crd(cluster, yaml.safe_load((SCHEMAS / crd_file).read_text(encoding="utf-8")))
    monkeypatch.setenv("ASYA_OPERATOR_SIDECAR_IMAGE", SIDECAR_IMAGE)
    monkeypatch.setenv("ASYA_OPERATOR_RECHECK_S", "0.2")
    return World(cluster, kube, namespace)


@pytest.fixture
async def broker_secret(world, amqp_url) -> dict[str, str]:
    data = {"amqp-url": amqp_url, "management-url": "http://guest:guest@127.0.0.1:15672/"}
    await world.create_secret("asya-broker", data)
    return data


@pytest.fixture
async def operator(world, run_operator) -> None:
    await run_operator(operator_registry())
    await world.cluster.watched(ACTORS)


@pytest.fixture
async def queues(amqp_url, namespace):
    """A client in the test's namespace; every queue an actor of these tests may have goes after."""
    options = RabbitMQOptions(namespace=namespace, connection_name="test_controller")
    async with RabbitMQTransport(amqp_url, options) as transport:
        yield transport
        await transport.delete_queues({"text", "other", "gone", HAPPY_END, ERROR_END})


@pytest.fixture
async def quota(world, kube):
    """Create or patch cluster-scoped objects (the pool, the flavor) off the event loop."""
    custom = CustomObjectsApi(kube)

    async def create(plural: str, body: dict[str, Any]) -> None:
        await asyncio.to_thread(custom.create_cluster_custom_object, GROUP, VERSION, plural, body)

    async def patch(plural: str, name: str, body: dict[str, Any]) -> None:
        await asyncio.to_thread(
            custom.patch_cluster_custom_object,
            GROUP,
            VERSION,
            plural,
            name,
            body,
            _content_type="application/merge-patch+json",
        )

    flavor = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceFlavor",
        "metadata": {"name": "gpu"},
    }
    await create("resourceflavors", {**flavor, "spec": {}})
    return create, patch
