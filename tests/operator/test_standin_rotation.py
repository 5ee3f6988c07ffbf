"""A namespace's broker passwords rotated under load, on the cluster stand-in with real pods and
the real broker: the operator made the identity (`config.brokerAdminSecret`), envelopes are in
flight and keep coming from a client whose connection was open before, the Secret is
annotated; the old password stops opening connections, every pod that reads the Secret is
rolled onto the new one, and every envelope sent is served exactly once."""

from __future__ import annotations

import asyncio
import base64
import textwrap
import urllib.parse
from typing import Any

import kubernetes
import pytest

from asya import Client, broker_identity
from asya.envelope import END_LIMITS, decode_envelope
from asya.routing import ERROR_END, HAPPY_END
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
from asya.transport.records import RecordKind
from tests.integration.tenancy.test_broker_identities import api
from tests.operator.controller_world import World, async_actor, operator_registry
from tests.operator.standin_kubelet import template_hash
from tests.operator.test_identities import CLOSE_NEVER_AWAITED, opens
from tests.operator.test_standin import ACTORS, DEPLOYMENTS, WAIT_S, wait_for

pytestmark = pytest.mark.rabbitmq

HANDLERS = """
import time
from asya import actor

@actor
def echo(doc):
    time.sleep(0.1)
    return doc
"""

ADMIN_SECRET = "asya-system/rabbitmq-admin"
SECRETS = "v1/secrets"
ENVELOPES = 20


def _decoded(secret: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


def _q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


@pytest.fixture
def identity_cleanup(broker, namespace):
    if broker.kind != "local":
        pytest.skip("needs the local RabbitMQ, whose guest user is an administrator")
    yield
    api(broker.url, "DELETE", f"/vhosts/{_q(broker_identity.vhost(namespace))}")
    for user in (broker_identity.actors_user(namespace), broker_identity.keda_user(namespace)):
        api(broker.url, "DELETE", f"/users/{_q(user)}")


@pytest.mark.timeout(240)
@pytest.mark.filterwarnings(CLOSE_NEVER_AWAITED)
async def test_credentials_rotated_under_load_roll_every_pod_and_lose_no_envelope(
    cluster,
    kube,
    kubelet,
    keda,
    run_operator,
    namespace,
    broker,
    actor_names,
    tmp_path,
    monkeypatch,
    identity_cleanup,
):
    (tmp_path / "image" / "standin_handlers.py").write_text(textwrap.dedent(HANDLERS))
    actor_names.add("echo")
    parts = urllib.parse.urlsplit(broker.url)
    admin = {
        "amqp-url": broker.url,
        "management-url": f"http://{parts.username}:{parts.password}@{parts.hostname}:15672/",
    }
    await World(cluster, kube, "asya-system").create_secret("rabbitmq-admin", admin)
    monkeypatch.setenv("ASYA_OPERATOR_BROKER_ADMIN_SECRET", ADMIN_SECRET)
    await run_operator(operator_registry())
    world = World(cluster, kube, namespace)
    await world.create_actor(
        async_actor(
            "echo",
            image="registry.example.com/standin:1",
            handler="standin_handlers:echo",
            scaling={"minReplicas": 2, "maxReplicas": 2, "pollingInterval": 1},
        )
    )

    # Given: the actor and the end actors running on the identity the operator made
    secret = await world.wait_exists(SECRETS, "asya-broker")
    before = _decoded(secret)
    for name in ("echo", HAPPY_END, ERROR_END):
        deployment = await wait_for(
            cluster, DEPLOYMENTS, namespace, name, lambda o: o is not None, name
        )
        async with asyncio.timeout(WAIT_S):
            await kubelet.wait_until(_running(kubelet, namespace, name, template_hash(deployment)))
    client = Client(before["amqp-url"], namespace=namespace)
    sent = {await client.send(["echo"], {"n": n}) for n in range(ENVELOPES)}

    # When: a rotation is asked for while envelopes are in flight, and more are sent
    core = kubernetes.client.CoreV1Api(kube)
    patch: Any = {"metadata": {"annotations": {"asya.sh/rotate": "1"}}}
    await asyncio.to_thread(core.patch_namespaced_secret, "asya-broker", namespace, patch)
    sent |= {await client.send(["echo"], {"n": n}) for n in range(ENVELOPES, 2 * ENVELOPES)}
    rotated = await world.wait_for(
        SECRETS,
        "asya-broker",
        lambda o: (
            ((o or {}).get("metadata", {}).get("annotations") or {}).get("asya.sh/rotated") == "1"
        ),
        "the rotation marked done",
    )
    after = _decoded(rotated)

    # Then: new passwords; the old one opens nothing, the new one does
    assert after["amqp-url"] != before["amqp-url"]
    assert after["management-url"] != before["management-url"]
    assert not await opens(before["amqp-url"])
    assert await opens(after["amqp-url"])
    # ... every pod reading the Secret rolled onto it
    for name in ("echo", HAPPY_END, ERROR_END):
        deployment = cluster.current(DEPLOYMENTS, namespace, name)
        annotations = deployment["spec"]["template"]["metadata"].get("annotations") or {}
        assert annotations.get("asya.sh/restarted-for") == "1", name
        try:
            async with asyncio.timeout(2 * WAIT_S):
                await kubelet.wait_until(
                    _running(kubelet, namespace, name, template_hash(deployment))
                )
        except TimeoutError:
            print(
                "DEBUG",
                name,
                template_hash(deployment),
                [
                    (p.name, p.ready, p.template, p.is_running())
                    for p in kubelet.pods(namespace, name)
                ],
                tmp_path,
            )
            raise
    # ... and every envelope was served once, none failed
    options = RabbitMQOptions(namespace=namespace, connection_name="rotation-test")
    async with RabbitMQTransport(after["amqp-url"], options) as transport:
        results: list[str] = []
        async with asyncio.timeout(4 * WAIT_S):
            async for record in transport.records.read(RecordKind.RESULTS, follow=True):
                results.append(decode_envelope(record.body, END_LIMITS).id)
                if sent <= set(results):
                    break
        assert sorted(results) == sorted(sent)
        assert [r async for r in transport.records.read(RecordKind.FAILURES)] == []
    await client.aclose()
    actor = cluster.current(ACTORS, namespace, "echo")
    assert actor["status"]["observedGeneration"] == 1


def _running(kubelet: Any, namespace: str, name: str, template: str) -> Any:
    def check() -> bool:
        pods = kubelet.pods(namespace, name)
        return bool(pods) and all(p.ready and p.template == template for p in pods)

    return check
