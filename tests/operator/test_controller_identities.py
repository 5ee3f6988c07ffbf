"""The operator makes each namespace's broker identity when the platform gives it an
administrator's credentials (`config.brokerAdminSecret`), on the stand-in cluster and the real
broker: two namespaces' actors come up with Secrets the operator wrote, each on its own vhost,
one team's credentials reach nothing of the other's, and the identity goes with the
namespace's last actor. A Secret the platform made is left as it is."""

from __future__ import annotations

import base64
import shutil
import urllib.parse

import pytest
from asya_operator.identities import IDENTITY_LABELS

from asya import broker_identity
from asya.queue_names import queue_name
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
from tests.integration.tenancy.test_broker_identities import (
    Tenant,
    amqp_attempt,
    api,
    assert_a_reaches_nothing_of_b,
    queue_ops,
    waiting_in,
)
from tests.operator.controller_world import (
    ACTORS,
    World,
    async_actor,
    observed,
    operator_registry,
)

pytestmark = pytest.mark.rabbitmq

ADMIN_SECRET = "asya-system/rabbitmq-admin"
SECRETS = "v1/secrets"


@pytest.fixture
async def admin(world, broker, kube, monkeypatch):
    """The administrator's Secret in the operator's namespace, and the operator told of it;
    every identity the test's namespaces got is removed after it."""
    if broker.kind != "local" or shutil.which("rabbitmqctl") is None:
        pytest.skip("needs the local RabbitMQ, whose guest user is an administrator")
    monkeypatch.setenv("ASYA_OPERATOR_BROKER_ADMIN_SECRET", ADMIN_SECRET)
    parts = urllib.parse.urlsplit(broker.url)
    data = {
        "amqp-url": broker.url,
        "management-url": f"http://{parts.username}:{parts.password}@{parts.hostname}:15672/",
    }
    await World(world.cluster, kube, "asya-system").create_secret("rabbitmq-admin", data)
    made: list[str] = []
    yield made
    for namespace in made:
        api(broker.url, "DELETE", f"/vhosts/{_q(broker_identity.vhost(namespace))}")
        for user in (broker_identity.actors_user(namespace), broker_identity.keda_user(namespace)):
            api(broker.url, "DELETE", f"/users/{_q(user)}")


def _q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _decoded(secret: dict) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


async def test_the_operator_gives_each_namespace_an_identity_and_removes_it_with_its_last_actor(
    world, kube, admin, broker, run_operator, namespace, used_namespaces
):
    # Given: two namespaces with no broker Secret, an actor created in each
    other = World(world.cluster, kube, f"{namespace}-b")
    admin.extend([namespace, other.namespace])
    used_namespaces[other.namespace] = set()
    await run_operator(operator_registry())
    await world.cluster.watched(ACTORS)
    await world.create_actor(async_actor("text"))
    await other.create_actor(async_actor("text"))

    # Then: each gets a Secret the operator made, naming its own users and vhost
    tenants = []
    for each in (world, other):
        secret = await each.wait_exists(SECRETS, "asya-broker")
        assert secret["metadata"]["labels"] == IDENTITY_LABELS
        data = _decoded(secret)
        amqp = urllib.parse.urlsplit(data["amqp-url"])
        assert amqp.username == broker_identity.actors_user(each.namespace)
        assert amqp.path == f"/{broker_identity.vhost(each.namespace)}"
        management = urllib.parse.urlsplit(data["management-url"])
        assert management.username == broker_identity.keda_user(each.namespace)
        await each.wait_for(ACTORS, "text", lambda o: observed(o) == 1, "text applied")
        tenants.append(
            Tenant(each.namespace, data["amqp-url"], data["management-url"], actor="text")
        )
    a, b = tenants
    # ... whose queues the operator declared in its own vhost, with its own identity
    assert await waiting_in(b.amqp_url, queue_name(b.namespace, "text")) == 0
    # ... and one team's credentials reach nothing of the other's (a reply queue of B's open)
    options = RabbitMQOptions(namespace=b.namespace, connection_name="b-client")
    async with RabbitMQTransport(b.amqp_url, options) as b_transport:
        reply = await b_transport.open_reply_queue()
        await assert_a_reaches_nothing_of_b(a, b, broker.url, reply.name)
        await reply.close()
    keda_tries = queue_ops(b.queue_of("text"))
    assert all([await amqp_attempt(b.keda_amqp_url, op) for op in keda_tries.values()])
    status, body = api(b.keda_url, "GET", f"/queues/{_q(b.vhost)}/{_q(b.queue_of('text'))}")
    assert status == 200, body

    # When: each namespace's last actor is deleted
    await world.delete_actor("text")
    await other.delete_actor("text")

    # Then: its Secret goes, and its users and (empty) vhost with it
    for each in (world, other):
        await each.wait_for(SECRETS, "asya-broker", lambda o: o is None, "the Secret removed")
        user = broker_identity.actors_user(each.namespace)
        assert api(broker.url, "GET", f"/users/{_q(user)}")[0] == 404
        keda = broker_identity.keda_user(each.namespace)
        assert api(broker.url, "GET", f"/users/{_q(keda)}")[0] == 404
        vhost = broker_identity.vhost(each.namespace)
        assert api(broker.url, "GET", f"/vhosts/{_q(vhost)}")[0] == 404


async def test_a_secret_the_platform_made_is_left_as_it_is(
    world, admin, broker_secret, operator, queues
):
    await world.create_actor(async_actor("text"))

    await world.wait_for(ACTORS, "text", lambda o: observed(o) == 1, "text applied")
    secret = await world.get(SECRETS, "asya-broker")
    assert _decoded(secret) == broker_secret
    assert secret["metadata"].get("labels") in (None, {})
    vhost = broker_identity.vhost(world.namespace)
    assert api(broker_secret["amqp-url"], "GET", f"/vhosts/{_q(vhost)}")[0] == 404

    await world.delete_actor("text")
    await world.wait_for(ACTORS, "text", lambda o: o is None, "text deleted")
    assert _decoded(await world.get(SECRETS, "asya-broker")) == broker_secret
