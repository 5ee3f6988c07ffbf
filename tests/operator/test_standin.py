"""The cluster stand-in on the real broker: an AsyncActor scales 0 -> N -> 0 with real processes.

The headline test is the last one: the real controller (`asya_operator.handlers.actors`)
against the emulator, the stand-in kubelet running every Deployment it applies (the actor's and
the end actors') as processes, the stand-in KEDA scaling the AsyncActor; the test creates only
the user's objects (the broker Secret and the AsyncActor) and reads the finals back from the
namespace's results, which happy-end's pod records.

The first tests exercise the stand-ins without the controller: the objects are planned by the
pure `plan_*` functions and created with the official client (`apply_planned`), and
`_follow_replicas` copies the AsyncActor's replicas to its Deployment. Both are TEST WIRING
standing in for the controller, kept so that a stand-in's failure shows apart from the
controller's. There the end actors run in the test (`finals`), counting every final by id, and
the planned end-actor Deployments are not created (their pods would consume the same queues).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import textwrap
import urllib.parse
from collections.abc import Callable
from typing import Any

import kubernetes
import msgspec
import pytest
from asya_operator.api.actor import AsyncActor
from asya_operator.api.template import (
    BROKER_AMQP_URL_KEY,
    BROKER_MANAGEMENT_URL_KEY,
    DEFAULT_BROKER_SECRET,
    GROUP,
    VERSION,
)
from asya_operator.config import OperatorConfig
from asya_operator.plans.actor_objects import plan_deployment, plan_end_actors
from asya_operator.plans.scaling import plan_scaled_object, plan_trigger_authentication

from asya import Client
from asya.envelope import END_LIMITS, Phase, decode_envelope
from asya.routing import ERROR_END, HAPPY_END
from asya.transport.records import RecordKind
from tests.operator.controller_world import operator_registry

ACTORS = f"{GROUP}/{VERSION}/asyncactors"
DEPLOYMENTS = "apps/v1/deployments"
WAIT_S = 40
ENVELOPES = 12

HANDLERS = """
import time
from asya import actor

@actor
def echo(doc):
    time.sleep(0.1)
    return doc
"""


def echo_actor() -> dict[str, Any]:
    """The AsyncActor `echo`: from zero, one replica per 5 messages, back to zero after 2 s."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AsyncActor",
        "metadata": {"name": "echo"},
        "spec": {
            "image": "registry.example.com/standin:1",
            "handler": "standin_handlers:echo",
            "scaling": {
                "minReplicas": 0,
                "maxReplicas": 2,
                "queueLength": 5,
                "pollingInterval": 1,
                "cooldownPeriod": 2,
            },
        },
    }


def management_url(amqp_url: str) -> str:
    """The management API beside the broker: same host and credentials, port 15672."""
    amqp = urllib.parse.urlsplit(amqp_url)
    auth = f"{amqp.username}:{amqp.password}@" if amqp.username else ""
    return f"http://{auth}{amqp.hostname}:15672{amqp.path or '/'}"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def create_broker_secret(kube, namespace: str, amqp_url: str) -> None:
    """The user's broker Secret: the AMQP URL and the management API's beside it."""
    # The client's types want its models; it sends plain dicts as they are.
    secret: Any = {
        "metadata": {"name": DEFAULT_BROKER_SECRET},
        "data": {
            BROKER_AMQP_URL_KEY: _b64(amqp_url),
            BROKER_MANAGEMENT_URL_KEY: _b64(management_url(amqp_url)),
        },
    }
    core = kubernetes.client.CoreV1Api(kube)
    await asyncio.to_thread(core.create_namespaced_secret, namespace, secret)


async def apply_planned(kube, namespace: str, body: dict[str, Any], amqp_url: str) -> None:
    """TEST WIRING: create what the controller would (the broker Secret is the user's)."""
    apps = kubernetes.client.AppsV1Api(kube)
    custom = kubernetes.client.CustomObjectsApi(kube)
    await create_broker_secret(kube, namespace, amqp_url)
    created = await asyncio.to_thread(
        custom.create_namespaced_custom_object, GROUP, VERSION, namespace, "asyncactors", body
    )
    actor = msgspec.convert(created, AsyncActor)
    deployment: Any = plan_deployment(actor, namespace, None, OperatorConfig())
    await asyncio.to_thread(apps.create_namespaced_deployment, namespace, deployment)
    for keda_object, plural in (
        (plan_trigger_authentication(actor, namespace), "triggerauthentications"),
        (plan_scaled_object(actor, namespace), "scaledobjects"),
    ):
        await asyncio.to_thread(
            custom.create_namespaced_custom_object,
            "keda.sh",
            "v1alpha1",
            namespace,
            plural,
            keda_object,
        )


async def _follow_replicas(cluster, kube, namespace: str, name: str) -> None:
    """TEST WIRING, the controller's job: the Deployment's replicas follow the AsyncActor's."""
    apps = kubernetes.client.AppsV1Api(kube)
    copied: int | None = None

    def changed(actor: dict[str, Any] | None) -> bool:
        return actor is not None and actor["spec"].get("replicas") != copied

    while True:
        actor = await cluster.wait_for(ACTORS, namespace, name, changed)
        copied = actor["spec"]["replicas"]
        patch = {"spec": {"replicas": copied}}
        await asyncio.to_thread(apps.patch_namespaced_deployment, name, namespace, patch)


async def wait_for(
    cluster, resource: str, namespace: str, name: str, condition: Callable[[Any], bool], what: str
) -> dict[str, Any]:
    try:
        async with asyncio.timeout(WAIT_S):
            found: dict[str, Any] = await cluster.wait_for(resource, namespace, name, condition)
            return found
    except TimeoutError:
        pytest.fail(f"not within {WAIT_S} s: {what}")


def environ(pid: int) -> dict[str, str]:
    """A running process's environment, as it was started."""
    with open(f"/proc/{pid}/environ", "rb") as found:
        pairs = [item.split(b"=", 1) for item in found.read().split(b"\0") if item]
    return {key.decode(): value.decode() for key, value in pairs}


async def back_to_zero(cluster, kubelet, namespace: str, actor: str) -> None:
    """Wait until the actor is scaled to 0, its Deployment has no pod, and no process is left."""
    await wait_for(
        cluster,
        ACTORS,
        namespace,
        actor,
        lambda o: o is not None and _count(o, "spec.replicas") == 0,
        "to zero",
    )
    await wait_for(
        cluster,
        DEPLOYMENTS,
        namespace,
        actor,
        lambda o: _count(o, "status.replicas") == 0,
        "no pod left",
    )
    async with asyncio.timeout(WAIT_S):
        await kubelet.wait_until(lambda: not kubelet.pods(namespace, actor))
        await kubelet.stopped()


def _count(body: dict[str, Any] | None, path: str) -> int:
    """The number at a dotted `path` of `body`; 0 when unset (as Kubernetes omits zeros)."""
    value: Any = body
    for part in path.split("."):
        value = (value or {}).get(part)
    return int(value or 0)


async def test_an_actor_scales_from_zero_serves_every_envelope_and_returns_to_zero(
    cluster, kube, kubelet, keda, transport, finals, namespace, amqp_url, actor_names, tmp_path
):
    (tmp_path / "image" / "standin_handlers.py").write_text(textwrap.dedent(HANDLERS))
    actor_names.add("echo")
    await transport.declare("echo")  # the controller's job too: the actor's queues
    body = echo_actor()
    await apply_planned(kube, namespace, body, amqp_url)
    follower = asyncio.create_task(_follow_replicas(cluster, kube, namespace, "echo"))
    try:
        deployment = await wait_for(
            cluster, DEPLOYMENTS, namespace, "echo", lambda o: "status" in (o or {}), "a status"
        )
        assert deployment["spec"]["replicas"] == 0
        assert deployment["status"]["replicas"] == 0
        assert kubelet.pods(namespace, "echo") == []

        client = Client(transport)
        sent = {await client.send(["echo"], {"n": n}) for n in range(ENVELOPES)}

        await wait_for(
            cluster,
            ACTORS,
            namespace,
            "echo",
            lambda o: _count(o, "spec.replicas") >= 1,
            "scale up",
        )
        await wait_for(
            cluster,
            DEPLOYMENTS,
            namespace,
            "echo",
            lambda o: _count(o, "status.readyReplicas") >= 1,
            "a ready pod",
        )
        (pod, *_) = kubelet.pods(namespace, "echo")
        assert set(pod.processes) == {"runtime", "sidecar"}
        assert all(p.returncode is None for p in pod.processes.values())
        runtime, sidecar = (environ(pod.processes[c].pid) for c in ("runtime", "sidecar"))
        assert runtime["ASYA_SOCKET_PATH"] == sidecar["ASYA_SOCKET_PATH"]
        assert runtime["ASYA_SOCKET_PATH"].startswith(f"{pod.dir}/asya-socket/")
        assert sidecar["ASYA_BROKER_URL"] == amqp_url  # from the Secret, by secretKeyRef
        assert "ASYA_BROKER_URL" not in runtime
        await finals.wait_until(lambda: sent <= set(finals.by_id()), WAIT_S)
        assert {e.id for e in finals.envelopes if e.status.phase is Phase.SUCCEEDED} == sent

        await back_to_zero(cluster, kubelet, namespace, "echo")
        assert kubelet.all_processes() == []
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower


async def test_the_end_actors_run_as_sidecar_pods_and_stop_when_deleted(
    cluster, kube, kubelet, transport, namespace, amqp_url
):
    body = {**echo_actor(), "metadata": {"name": "echo", "uid": "6f1c1c9e-0000-4000-8000-0000"}}
    apps = kubernetes.client.AppsV1Api(kube)
    await create_broker_secret(kube, namespace, amqp_url)
    ends: list[Any] = plan_end_actors(
        namespace, [msgspec.convert(body, AsyncActor)], OperatorConfig()
    )
    for end in ends:
        await asyncio.to_thread(apps.create_namespaced_deployment, namespace, end)
    for name in (HAPPY_END, ERROR_END):
        await wait_for(
            cluster,
            DEPLOYMENTS,
            namespace,
            name,
            lambda o: _count(o, "status.readyReplicas") == 1,
            f"{name} ready",
        )
    (pod,) = kubelet.pods(namespace, HAPPY_END)
    assert set(pod.processes) == {"sidecar"}

    await asyncio.to_thread(apps.delete_namespaced_deployment, HAPPY_END, namespace)
    async with asyncio.timeout(WAIT_S):
        await kubelet.wait_until(lambda: not kubelet.pods(namespace, HAPPY_END))
        await kubelet.stopped()
    assert pod.processes["sidecar"].returncode is not None
    assert len(kubelet.all_processes()) == 1  # error-end's sidecar, stopped by the fixture


async def test_on_the_controller_an_actor_scales_from_zero_and_back_with_its_end_actors_as_pods(
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
    """The headline test on the real controller: no test wiring, only the user's objects."""
    (tmp_path / "image" / "standin_handlers.py").write_text(textwrap.dedent(HANDLERS))
    actor_names.add("echo")  # its queues go after the test
    await create_broker_secret(kube, namespace, amqp_url)
    await run_operator(operator_registry())
    await cluster.watched(ACTORS)
    custom = kubernetes.client.CustomObjectsApi(kube)
    await asyncio.to_thread(
        custom.create_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        "asyncactors",
        echo_actor(),
    )
    await wait_for(
        cluster,
        ACTORS,
        namespace,
        "echo",
        lambda o: _count(o, "status.observedGeneration") >= 1,
        "the controller applied the actor's objects and declared its queues",
    )
    for end in (HAPPY_END, ERROR_END):
        await wait_for(
            cluster,
            DEPLOYMENTS,
            namespace,
            end,
            lambda o: _count(o, "status.readyReplicas") == 1,
            f"{end} runs as a pod",
        )
    assert kubelet.pods(namespace, "echo") == []

    client = Client(transport)
    sent = {await client.send(["echo"], {"n": n}) for n in range(ENVELOPES)}

    await wait_for(
        cluster, ACTORS, namespace, "echo", lambda o: _count(o, "spec.replicas") >= 1, "scale up"
    )
    await wait_for(
        cluster,
        DEPLOYMENTS,
        namespace,
        "echo",
        lambda o: _count(o, "status.readyReplicas") >= 1,
        "the controller scaled the Deployment, and a pod is ready",
    )
    # happy-end's pod records each final envelope in the namespace's results: read them back.
    results: set[str] = set()
    async with asyncio.timeout(WAIT_S):
        async for record in transport.records.read(RecordKind.RESULTS, follow=True):
            results.add(decode_envelope(record.body, END_LIMITS).id)
            if sent <= results:
                break
    assert results == sent

    await back_to_zero(cluster, kubelet, namespace, "echo")
