"""Two namespaces, each given its broker identity by the platform engineer's guide's own commands
(run here against the real broker): team A's credentials reach nothing of team B's, B's KEDA
identity reads depths and nothing else, and B's pipeline loses and gains no envelope meanwhile.

Every attempt is made as an attacker would, and each refusal is asserted: through AMQP on B's
vhost, through every exchange of A's own vhost with B's queue names as routing keys, and through
the management API.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import shutil
import signal
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aio_pika
import aiormq
import pytest
from asya_operator.queues import declare_actor_queues

from asya import broker_admin, broker_identity
from asya.client import Client
from asya.queue_names import queue_name
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
from asya.transport.rabbitmq_counts import messages_ready
from asya.transport.records import RecordKind, records_stream_name
from tests.broker import new_namespace
from tests.docs.pages import DOCS, commands
from tests.integration.cli.processes import read_stderr_until, start_asya

pytestmark = pytest.mark.rabbitmq

GUIDE = DOCS / "guide-platform-engineer.md"
GUIDE_NAMESPACE = "ml-b"
GUIDE_HOST = "rabbitmq.messaging"
GUIDE_PASSWORDS = ("ML_B_KEDA_PASSWORD", "ML_B_PASSWORD")
"""Placeholders of the guide's commands (the longer first: one holds the other)."""
MANAGEMENT_PORT = 15672

ECHO_APP = """
from asya import actor


@actor
def echo(doc):
    return {**doc, "echoed": True}
"""


@dataclass(frozen=True)
class Tenant:
    namespace: str
    amqp_url: str
    """The namespace Secret's `amqp-url`: its actors' identity."""
    keda_url: str
    """The namespace Secret's `management-url`: KEDA's identity."""
    actor: str = "echo"
    """The actor whose queue the attempts aim at."""

    @property
    def vhost(self) -> str:
        return broker_identity.vhost(self.namespace)

    @property
    def queue(self) -> str:
        return self.queue_of(self.actor)

    def queue_of(self, actor: str) -> str:
        return queue_name(self.namespace, actor)

    @property
    def keda_amqp_url(self) -> str:
        """KEDA's credentials over AMQP (what its management URL's user could try there)."""
        parts = urllib.parse.urlsplit(self.keda_url)
        host = parts.netloc.replace(f":{MANAGEMENT_PORT}", f":{self.amqp_port}")
        return urllib.parse.urlunsplit(parts._replace(scheme="amqp", netloc=host))

    @property
    def amqp_port(self) -> int:
        return urllib.parse.urlsplit(self.amqp_url).port or 5672

    def on_vhost(self, url: str) -> str:
        """`url`'s credentials on this tenant's vhost (an attacker's choice of vhost)."""
        parts = urllib.parse.urlsplit(url)
        return urllib.parse.urlunsplit(parts._replace(path="/" + self.vhost))


def _guide_commands() -> list[tuple[str, ...]]:
    """The guide's commands that give namespace `ml-b` its identity and Secret."""
    found = [
        c.argv
        for c in commands(GUIDE)
        if c.argv[0] == "rabbitmqctl" or c.argv[:3] == ("kubectl", "create", "secret")
    ]
    assert any(a[0] == "rabbitmqctl" for a in found)
    assert any(a[0] == "kubectl" for a in found)
    return found


def provision_as_the_guide_says(namespace: str, amqp_host: str, amqp_port: int) -> Tenant:
    """Run the guide's `rabbitmqctl` commands for `namespace` (names and passwords put in for
    the guide's), and read the Secret its `kubectl create secret` would make."""
    passwords = {p: secrets.token_hex(24) for p in GUIDE_PASSWORDS}

    def local(arg: str) -> str:
        for placeholder, password in passwords.items():
            arg = arg.replace(placeholder, password)
        arg = arg.replace(f"{GUIDE_HOST}:5672", f"{amqp_host}:{amqp_port}")
        arg = arg.replace(f"{GUIDE_HOST}:{MANAGEMENT_PORT}", f"{amqp_host}:{MANAGEMENT_PORT}")
        return arg.replace(GUIDE_NAMESPACE, namespace)

    secret: dict[str, str] = {}
    for argv in _guide_commands():
        argv = tuple(local(a) for a in argv)
        if argv[0] == "rabbitmqctl":
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"
        else:
            literals = [a.split("=", 1)[1] for a in argv if a.startswith("--from-literal")]
            for literal in literals:
                key, _, value = literal.partition("=")
                secret[key] = value
    return Tenant(namespace, secret["amqp-url"], secret["management-url"])


def provision_as_the_operator_does(namespace: str, admin_amqp_url: str) -> Tenant:
    """What the operator does with an administrator's credentials (`asya_operator.identities`):
    the identity through the management API, the Secret's URLs from the admin's."""
    parts = urllib.parse.urlsplit(admin_amqp_url)
    admin_management = f"http://{parts.username}:{parts.password}@{parts.hostname}:15672/"
    password, keda_password = secrets.token_hex(24), secrets.token_hex(24)
    asyncio.run(broker_admin.provision(admin_management, namespace, password, keda_password))
    amqp_url, management_url = broker_identity.identity_urls(
        admin_amqp_url, admin_management, namespace, password, keda_password
    )
    return Tenant(namespace, amqp_url, management_url)


@pytest.fixture(scope="module", params=["the guide's commands", "the operator's calls"])
def tenants(broker, request):
    """Two namespaces, each given its identity as the guide says, or as the operator does."""
    if broker.kind != "local" or shutil.which("rabbitmqctl") is None:
        pytest.skip("needs the local RabbitMQ server (rabbitmqctl; guest an administrator)")
    admin = broker.url
    parts = urllib.parse.urlsplit(admin)
    if request.param == "the guide's commands":
        made = [
            provision_as_the_guide_says(new_namespace(), parts.hostname or "", parts.port or 5672)
            for _ in range(2)
        ]
    else:
        made = [provision_as_the_operator_does(new_namespace(), admin) for _ in range(2)]
    yield made
    for tenant in made:
        api(admin, "DELETE", f"/vhosts/{_quoted(tenant.vhost)}")
        for user in (
            broker_identity.actors_user(tenant.namespace),
            broker_identity.keda_user(tenant.namespace),
        ):
            api(admin, "DELETE", f"/users/{_quoted(user)}")


def _quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def api(url: str, method: str, path: str, body: object = None) -> tuple[int, str]:
    """The management API beside `url`'s broker, as `url`'s user: (HTTP status, body)."""
    parts = urllib.parse.urlsplit(url)
    request = urllib.request.Request(
        f"http://{parts.hostname}:{MANAGEMENT_PORT}/api{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    credentials = base64.b64encode(f"{user}:{password}".encode()).decode()
    request.add_unredirected_header("Authorization", f"Basic {credentials}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def exchanges_of(admin_url: str, vhost: str) -> list[str]:
    status, body = api(admin_url, "GET", f"/exchanges/{_quoted(vhost)}?columns=name")
    assert status == 200, body
    return sorted(e["name"] for e in json.loads(body))


# --- attempts ---------------------------------------------------------------------------------

Op = Callable[[aio_pika.abc.AbstractChannel], Awaitable[object]]


async def amqp_attempt(url: str, op: Op) -> str | None:
    """Open `url`, make `op` on a fresh channel with publisher confirms: None when it went
    through, else what refused it (the broker's words)."""
    try:
        connection = await aio_pika.connect(url, timeout=10)
    except (aiormq.exceptions.AMQPError, ConnectionError, OSError) as exc:
        # A vhost the user may not open: the broker answers the open with Connection.Close.
        return f"connection refused: {exc!r}"
    try:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        try:
            await op(channel)
        except aiormq.exceptions.DeliveryError as exc:
            return f"returned: {exc!r}"
        except aiormq.exceptions.AMQPError as exc:
            return f"refused: {exc!r}"
        return None
    finally:
        await connection.close()


def publish_via(exchange: str, routing_key: str) -> Op:
    async def op(channel: aio_pika.abc.AbstractChannel) -> object:
        target = (
            channel.default_exchange
            if exchange == ""
            else await channel.get_exchange(exchange, ensure=False)
        )
        message = aio_pika.Message(b'{"id": "forged"}', delivery_mode=2)
        return await target.publish(message, routing_key, mandatory=True)

    return op


async def _ignore(_message: aio_pika.abc.AbstractIncomingMessage) -> None:
    return None


def queue_op(queue: str, what: str, **arguments: str) -> Op:
    async def op(channel: aio_pika.abc.AbstractChannel) -> object:
        if what == "declare":
            return await channel.declare_queue(
                queue, durable=True, arguments=dict(arguments) or None
            )
        target = await channel.get_queue(queue, ensure=False)
        if what == "get":
            return await target.get(fail=False)
        if what == "consume":
            await channel.set_qos(prefetch_count=1)
            return await target.consume(_ignore, arguments=dict(arguments) or None)
        if what == "purge":
            return await target.purge()
        if what == "delete":
            return await target.delete(if_unused=False, if_empty=False)
        if what == "bind":
            return await target.bind("amq.fanout")
        raise AssertionError(what)

    return op


def queue_ops(queue: str) -> dict[str, Op]:
    return {f"{what} {queue}": queue_op(queue, what) for what in _QUEUE_VERBS}


_QUEUE_VERBS = ("consume", "get", "purge", "delete", "bind", "declare")


def stream_reads(namespace: str) -> dict[str, Op]:
    return {
        f"read {name}": queue_op(name, "consume", **{"x-stream-offset": "first"})
        for name in (
            records_stream_name(namespace, RecordKind.RESULTS),
            records_stream_name(namespace, RecordKind.FAILURES),
        )
    }


def api_attempts(
    vhost: str, queue: str, exchanges: list[str]
) -> dict[str, tuple[str, str, object]]:
    """What a management API user could try on `queue` of `vhost`: (method, path, body)."""
    v, q = _quoted(vhost), _quoted(queue)
    message = {
        "properties": {},
        "routing_key": queue,
        "payload": "{}",
        "payload_encoding": "string",
    }
    attempts: dict[str, tuple[str, str, object]] = {
        "read the queue": ("GET", f"/queues/{v}/{q}", None),
        "get messages": (
            "POST",
            f"/queues/{v}/{q}/get",
            {"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"},
        ),
        "purge": ("DELETE", f"/queues/{v}/{q}/contents", None),
        "delete": ("DELETE", f"/queues/{v}/{q}", None),
        "declare a queue": ("PUT", f"/queues/{v}/{q}.shadow", {"durable": True}),
        "bind": ("POST", f"/bindings/{v}/e/amq.fanout/q/{q}", {"routing_key": ""}),
    }
    for exchange in exchanges:
        name = exchange or "amq.default"
        attempts[f"publish via {name}"] = (
            "POST",
            f"/exchanges/{v}/{_quoted(name)}/publish",
            message,
        )
    return attempts


def refused_by_api(status: int, body: str) -> bool:
    # The API refuses with 401, or with 400 naming the broker's 403 for a publish.
    return status in (401, 403) or (status == 400 and "ACCESS_REFUSED" in body)


# --- B's pipeline -------------------------------------------------------------------------------


async def serve(tenant: Tenant, app: str) -> asyncio.subprocess.Process:
    process = await start_asya(
        "serve", app, "--broker", tenant.amqp_url, "--namespace", tenant.namespace
    )
    await read_stderr_until(process, "asya: serving")
    return process


async def stop(process: asyncio.subprocess.Process) -> None:
    process.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()


async def results_of(tenant: Tenant, count: int, timeout_s: float = 60) -> list[str]:
    """The ids B's results stream holds, once it holds `count`, read to its end."""
    options = RabbitMQOptions(namespace=tenant.namespace, connection_name="tenancy-test")
    async with RabbitMQTransport(tenant.amqp_url, options) as transport:
        seen = 0
        async with asyncio.timeout(timeout_s):
            async for _record in transport.records.read(RecordKind.RESULTS, follow=True):
                seen += 1
                if seen >= count:
                    break
        return [
            json.loads(record.body)["id"]
            async for record in transport.records.read(RecordKind.RESULTS)
        ]


async def waiting_in(url: str, queue: str) -> int:
    """Messages ready in `queue` of `url`'s vhost, as the broker counts them now."""
    connection = await aio_pika.connect(url, timeout=10)
    async with connection:
        channel = await connection.channel()
        declared = await channel.declare_queue(queue, passive=True)
        return declared.declaration_result.message_count or 0


async def failures_of(tenant: Tenant) -> list[bytes]:
    options = RabbitMQOptions(namespace=tenant.namespace, connection_name="tenancy-test")
    async with RabbitMQTransport(tenant.amqp_url, options) as transport:
        return [r.body async for r in transport.records.read(RecordKind.FAILURES)]


async def depth_as_keda_reads_it(
    tenant: Tenant, actor: str, ready: int, timeout_s: float = 30
) -> dict[str, object]:
    """An actor's queue as KEDA reads it (the management API, KEDA's identity), once its ready
    count is `ready`: the API's statistics trail the queue by a few seconds."""
    queue = queue_name(tenant.namespace, actor)
    path = f"/queues/{_quoted(tenant.vhost)}/{_quoted(queue)}"
    async with asyncio.timeout(timeout_s):
        while True:
            status, body = await asyncio.to_thread(api, tenant.keda_url, "GET", path)
            assert status == 200, body
            found: dict[str, object] = json.loads(body)
            if found.get("messages_ready") == ready:
                return found
            await asyncio.sleep(0.5)


async def assert_a_reaches_nothing_of_b(a: Tenant, b: Tenant, admin_url: str, reply: str) -> None:
    """With A's credentials, everything on B's resources (its actor's queue, its streams,
    the reply queue `reply` of a client of B's): through AMQP on B's vhost, each refused at
    once; through every exchange of A's own vhost with B's queue names as routing keys, each
    returned unroutable; through the management API, each refused."""
    on_b = {
        **queue_ops(b.queue),
        **stream_reads(b.namespace),
        f"declare {b.queue} (a shadow)": queue_op(b.queue, "declare"),
        f"reply into {reply}": publish_via("", reply),
    }
    for exchange in exchanges_of(admin_url, b.vhost):
        on_b[f"publish into {b.queue} via {exchange or 'the default exchange'}"] = publish_via(
            exchange, b.queue
        )
    refusals = {what: await amqp_attempt(b.on_vhost(a.amqp_url), op) for what, op in on_b.items()}
    for exchange in exchanges_of(admin_url, a.vhost):
        for key in (b.queue, reply):
            what = f"publish to {key} via own {exchange or 'default exchange'}"
            refusals[what] = await amqp_attempt(a.amqp_url, publish_via(exchange, key))
    api_refusals = {
        what: await asyncio.to_thread(api, a.amqp_url, method, path, body)
        for what, (method, path, body) in api_attempts(
            b.vhost, b.queue, exchanges_of(admin_url, b.vhost)
        ).items()
    }

    assert [what for what, why in refusals.items() if why is None] == []
    assert all(
        why is not None and why.startswith("connection refused") and "Connection.Close" in why
        for what, why in refusals.items()
        if what in on_b
    ), refusals
    assert [w for w, (s, body) in api_refusals.items() if not refused_by_api(s, body)] == []
    assert len(refusals) >= 14
    assert len(api_refusals) >= 10


# --- tests ------------------------------------------------------------------------------------


async def test_team_a_reaches_nothing_of_team_b_and_b_counts_every_envelope(
    tenants, broker, tmp_path
):
    a, b = tenants
    app = tmp_path / "echo_app.py"
    app.write_text(ECHO_APP)
    # Given: B's queues declared as the operator declares them, with B's Secret, and envelopes
    # waiting in B's actor queue; a reply queue of a client of B's open
    await declare_actor_queues(b.amqp_url, b.namespace, "echo")
    options = RabbitMQOptions(namespace=b.namespace, connection_name="b-client")
    async with RabbitMQTransport(b.amqp_url, options) as b_transport:
        reply_queue = await b_transport.open_reply_queue()
        async with Client(b_transport, namespace=b.namespace) as client:
            sent = [await client.send(["echo"], {"n": n}) for n in range(5)]
        await depth_as_keda_reads_it(b, "echo", ready=5)

        # When: A tries, with its own credentials, everything on B's resources
        # Then: every one was refused by the broker, or returned as unroutable
        await assert_a_reaches_nothing_of_b(a, b, broker.url, reply_queue.name)

        # When: A declares a queue of B's name in its own vhost (allowed: it is A's), and B
        # serves its pipeline, sends more and calls with a reply
        assert await amqp_attempt(a.amqp_url, queue_op(b.queue, "declare")) is None
        served = await serve(b, str(app))
        try:
            async with Client(b_transport, namespace=b.namespace) as client:
                sent += [await client.send(["echo"], {"n": n}) for n in range(5, 10)]
                answered = await client.call(["echo"], {"n": 99}, timeout_s=60)
        finally:
            await stop(served)
        await reply_queue.close()

    # Then: B's replies reached B's own client, and B's results hold each envelope once
    assert answered.one().payload == {"n": 99, "echoed": True}
    assert await waiting_in(a.amqp_url, b.queue) == 0
    recorded = await results_of(b, count=11)
    assert sorted(recorded) == sorted([*sent, answered.one().id])
    assert await failures_of(b) == []


async def test_keda_s_identity_reads_its_namespace_s_depths_and_can_do_nothing_else(
    tenants, broker
):
    a, b = tenants
    # Given: an actor of B's declared as the operator declares it, three envelopes waiting
    await declare_actor_queues(b.amqp_url, b.namespace, "waiting")
    queue = queue_name(b.namespace, "waiting")
    async with Client(b.amqp_url, namespace=b.namespace) as client:
        for n in range(3):
            await client.send(["waiting"], {"n": n})

    # When: KEDA's identity of B reads the depth, and tries everything else on B's vhost
    found = await depth_as_keda_reads_it(b, "waiting", ready=3)
    on_b = {**queue_ops(queue), **stream_reads(b.namespace)}
    for exchange in exchanges_of(broker.url, b.vhost):
        on_b[f"publish via {exchange or 'the default exchange'}"] = publish_via(exchange, queue)
    refusals = {what: await amqp_attempt(b.keda_amqp_url, op) for what, op in on_b.items()}
    api_refusals = {
        what: await asyncio.to_thread(api, b.keda_url, method, path, body)
        for what, (method, path, body) in api_attempts(
            b.vhost, queue, exchanges_of(broker.url, b.vhost)
        ).items()
        if what != "read the queue"
    }
    # ... and reaches for A's namespace
    on_a = await asyncio.to_thread(
        api, b.keda_url, "GET", f"/queues/{_quoted(a.vhost)}/{_quoted(a.queue)}"
    )
    into_a = await amqp_attempt(a.on_vhost(b.keda_amqp_url), queue_op(a.queue, "get"))

    # Then: it read the depth, unacked included, and every other attempt was refused
    assert found["messages_unacknowledged"] == 0
    assert [what for what, why in refusals.items() if why is None] == []
    assert all("ACCESS_REFUSED" in why for why in refusals.values() if why), refusals
    assert [w for w, (s, body) in api_refusals.items() if not refused_by_api(s, body)] == []
    assert refused_by_api(*on_a)
    assert into_a is not None
    assert into_a.startswith("connection refused")
    # ... and the envelopes are where they were
    assert await waiting_in(b.amqp_url, queue) == 3


async def asya_status(url: str, namespace: str) -> str:
    process = await start_asya("status", "--broker", url, "--namespace", namespace)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_asya_status_says_when_a_credential_reaches_other_namespaces_and_not_when_own(
    tenants, broker, used_namespaces
):
    _a, b = tenants
    # Given: B's actor on B's vhost; two namespaces' actors on the shared vhost of one user
    await declare_actor_queues(b.amqp_url, b.namespace, "echo")
    shared = [new_namespace(), new_namespace()]
    for namespace in shared:
        used_namespaces[namespace] = {"echo"}
        await declare_actor_queues(broker.url, namespace, "echo")

    # When: asya status reads each namespace with the credential it was given
    own = await asya_status(b.amqp_url, b.namespace)
    mixed = await asya_status(broker.url, shared[0])

    # Then: B's own identity reaches B alone: no note; the shared one names the other namespace
    assert "echo" in own
    assert "reaches more than" not in own
    # (other tests' namespaces may share the vhost too: the note names five and counts the rest)
    assert f"reaches more than namespace {shared[0]} needs" in mixed
    assert "also holds the queues of namespace(s)" in mixed
    assert "it may open vhost(s)" in mixed  # the administrator opens B's vhost too
    assert "it is tagged administrator" in mixed


async def test_removing_an_identity_keeps_a_vhost_that_still_holds_messages(broker):
    if broker.kind != "local":
        pytest.skip("needs the local RabbitMQ server, whose guest is an administrator")
    parts = urllib.parse.urlsplit(broker.url)
    admin = f"http://{parts.username}:{parts.password}@{parts.hostname}:15672/"
    kept, emptied = new_namespace(), new_namespace()
    try:
        # Given: two identities, one with an envelope waiting in an actor's queue
        for namespace in (kept, emptied):
            tenant = await asyncio.to_thread(provision_as_the_operator_does, namespace, broker.url)
            await declare_actor_queues(tenant.amqp_url, namespace, "echo")
            if namespace == kept:
                async with Client(tenant.amqp_url, namespace=namespace) as client:
                    await client.send(["echo"], {"n": 1})

        # When: both are removed (right away: the management API's counts are not there yet)
        removed = {
            ns: await broker_admin.remove(admin, ns, ready=_ready_in(broker.url, ns))
            for ns in (kept, emptied)
        }

        # Then: the users go; the vhost with a message stays, the empty one goes
        assert removed == {kept: False, emptied: True}
        for namespace in (kept, emptied):
            user = broker_identity.actors_user(namespace)
            assert api(broker.url, "GET", f"/users/{_quoted(user)}")[0] == 404
        vhosts = {
            ns: api(broker.url, "GET", f"/vhosts/{_quoted(broker_identity.vhost(ns))}")[0]
            for ns in (kept, emptied)
        }
        assert vhosts == {kept: 200, emptied: 404}
        # ... and removing again finds nothing more to do
        assert await broker_admin.remove(admin, emptied, ready=_ready_in(broker.url, emptied))
    finally:
        for namespace in (kept, emptied):
            api(broker.url, "DELETE", f"/vhosts/{_quoted(broker_identity.vhost(namespace))}")


def _ready_in(admin_amqp_url: str, namespace: str):
    at = broker_identity.on_vhost(admin_amqp_url, broker_identity.vhost(namespace))
    return lambda names: messages_ready(at, names)
