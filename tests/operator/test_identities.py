"""`asya_operator.identities` against the real broker, with the cluster's Secrets in memory: an
identity is made once, made again by a restarted operator for a broker that lost it, costs a
later reconcile no call to the broker, and goes with the namespace's last actor."""

from __future__ import annotations

import gc
import urllib.parse
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import aio_pika
import aiormq
import pytest
from asya_operator.config import OperatorConfig
from asya_operator.identities import IDENTITY_LABELS, Identities

from asya import broker_identity
from asya.errors import TransportError
from tests.broker import new_namespace
from tests.integration.tenancy.test_broker_identities import api

pytestmark = pytest.mark.rabbitmq

ADMIN = "asya-system/rabbitmq-admin"


@dataclass
class Owners:
    staying: list[str] = field(default_factory=list)


@dataclass
class Secrets:
    """The cluster as `Identities` reads it: Secrets by (namespace, name), and who is left."""

    data: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    labels: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    annotations: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    left: list[str] = field(default_factory=list)

    async def read_secret(self, namespace: str, name: str) -> dict[str, str] | None:
        return self.data.get((namespace, name))

    async def read_secret_parts(
        self, namespace: str, name: str
    ) -> tuple[dict[str, str], dict[str, str], dict[str, str]] | None:
        if (namespace, name) not in self.data:
            return None
        return (
            dict(self.labels.get((namespace, name), {})),
            dict(self.annotations.get((namespace, name), {})),
            dict(self.data[namespace, name]),
        )

    async def patch_secret(
        self, namespace: str, name: str, data: Mapping[str, str], annotations: Mapping[str, str]
    ) -> None:
        self.data[namespace, name].update(data)
        self.annotations.setdefault((namespace, name), {}).update(annotations)

    async def create_secret(
        self, namespace: str, name: str, labels: Mapping[str, str], data: Mapping[str, str]
    ) -> bool:
        if (namespace, name) in self.data:
            return False
        self.data[namespace, name], self.labels[namespace, name] = dict(data), dict(labels)
        return True

    async def delete_secret(self, namespace: str, name: str) -> None:
        self.data.pop((namespace, name), None)

    async def name_owners(self, namespace: str) -> Owners:
        return Owners(self.left)


@pytest.fixture
def cluster(broker):
    if broker.kind != "local":
        pytest.skip("needs the local RabbitMQ server, whose guest is an administrator")
    parts = urllib.parse.urlsplit(broker.url)
    management = f"http://{parts.username}:{parts.password}@{parts.hostname}:15672/"
    made = Secrets()
    made.data["asya-system", "rabbitmq-admin"] = {
        "amqp-url": broker.url,
        "management-url": management,
    }
    return made


@pytest.fixture
def namespace(broker):
    name = new_namespace()
    yield name
    api(broker.url, "DELETE", f"/vhosts/{_q(broker_identity.vhost(name))}")
    for user in (broker_identity.actors_user(name), broker_identity.keda_user(name)):
        api(broker.url, "DELETE", f"/users/{_q(user)}")


def _q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _user_exists(admin_url: str, namespace: str) -> bool:
    return api(admin_url, "GET", f"/users/{_q(broker_identity.actors_user(namespace))}")[0] == 200


async def test_an_identity_is_made_once_made_again_at_start_and_removed_with_the_last_actor(
    cluster, namespace, broker
):
    config = OperatorConfig(broker_admin_secret=ADMIN)
    operator = Identities(cluster, config)

    # Made: the broker's users and vhost, then the Secret, labelled as the operator's
    await operator.ensure(namespace, "asya-broker")
    secret = dict(cluster.data[namespace, "asya-broker"])
    assert cluster.labels[namespace, "asya-broker"] == IDENTITY_LABELS
    assert _user_exists(broker.url, namespace)

    # A later reconcile of the namespace makes no call to the broker: a user lost meanwhile
    # stays lost (a read of the Secret's labels is all it costs)
    api(broker.url, "DELETE", f"/users/{_q(broker_identity.actors_user(namespace))}")
    await operator.ensure(namespace, "asya-broker")
    assert not _user_exists(broker.url, namespace)

    # A restarted operator makes it again, from the Secret's own passwords
    restarted = Identities(cluster, config)
    await restarted.ensure(namespace, "asya-broker")
    assert _user_exists(broker.url, namespace)
    assert cluster.data[namespace, "asya-broker"] == secret

    # Not while an actor is left; then all of it
    cluster.left = ["text"]
    await restarted.release(namespace)
    assert (namespace, "asya-broker") in cluster.data
    cluster.left = []
    await restarted.release(namespace)
    assert (namespace, "asya-broker") not in cluster.data
    assert not _user_exists(broker.url, namespace)
    assert api(broker.url, "GET", f"/vhosts/{_q(broker_identity.vhost(namespace))}")[0] == 404


async def test_a_secret_of_another_name_or_the_platforms_is_not_the_operators(
    cluster, namespace, broker
):
    operator = Identities(cluster, OperatorConfig(broker_admin_secret=ADMIN))
    cluster.data[namespace, "asya-broker"] = {"amqp-url": "amqp://shared:pw@host/"}
    cluster.labels[namespace, "asya-broker"] = {}

    await operator.ensure(namespace, "asya-broker")
    await operator.ensure(namespace, "team-broker")
    await operator.release(namespace)

    assert cluster.data[namespace, "asya-broker"] == {"amqp-url": "amqp://shared:pw@host/"}
    assert (namespace, "team-broker") not in cluster.data
    assert not _user_exists(broker.url, namespace)


async def test_without_the_administrators_secret_the_error_names_it(cluster, namespace):
    operator = Identities(cluster, OperatorConfig(broker_admin_secret="asya-system/missing"))

    with pytest.raises(TransportError, match="asya-system/missing is missing or lacks amqp-url"):
        await operator.ensure(namespace, "asya-broker")


CLOSE_NEVER_AWAITED = "ignore:coroutine 'Connection.close' was never awaited:RuntimeWarning"
"""aio-pika leaves a close coroutine unawaited when the broker refuses a login: not ours."""


async def opens(url: str) -> bool:
    """Whether `url`'s credentials open a connection to its vhost now."""
    try:
        connection = await aio_pika.connect(url, timeout=10)
    except (aiormq.exceptions.AMQPError, ConnectionError, OSError):
        pass
    else:
        await connection.close()
        return True
    # The refused connection's close coroutine goes now, its warning with it, not in a later
    # test's garbage collection.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        gc.collect()
    return False


@pytest.mark.filterwarnings(CLOSE_NEVER_AWAITED)
async def test_a_rotation_changes_the_passwords_rolls_then_marks_and_runs_once_per_request(
    cluster, namespace, broker
):
    operator = Identities(cluster, OperatorConfig(broker_admin_secret=ADMIN))
    await operator.ensure(namespace, "asya-broker")
    before = dict(cluster.data[namespace, "asya-broker"])
    rolls: list[tuple[str, str | None]] = []

    async def roll(value: str) -> None:
        # The Secret holds the new passwords when the pods are rolled, and is not marked yet.
        marked = cluster.annotations.get((namespace, "asya-broker"), {}).get("asya.sh/rotated")
        rolls.append((value, marked))
        assert cluster.data[namespace, "asya-broker"] != before

    asked = {"asya.sh/rotate": "1"}
    done = await operator.rotate(namespace, asked, roll)
    # The event of the rotation's own write still shows the request unmarked: nothing again
    again = await operator.rotate(namespace, asked, roll)

    after = dict(cluster.data[namespace, "asya-broker"])
    assert (done, again) == ("1", None)
    assert rolls == [("1", None)]
    assert cluster.annotations[namespace, "asya-broker"]["asya.sh/rotated"] == "1"
    assert not await opens(before["amqp-url"])
    assert await opens(after["amqp-url"])
    assert await operator.rotate(namespace, {"asya.sh/rotate": "2"}, roll) == "2"
    assert not await opens(after["amqp-url"])
