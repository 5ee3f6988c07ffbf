"""Two teams whose names once met in one queue (`ml`'s actor `a-embed` and `ml-a`'s actor
`embed`, both `asya-ml-a-embed` under the old names) get a queue each, end to end: the operator
declares two queues, KEDA is pointed at each, what one team sends stays in its queue, and
deleting one team's actor leaves the other's queue as it was. On the stand-in cluster, with the
real broker."""

from __future__ import annotations

import pytest

from asya.routing import ERROR_END, HAPPY_END
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
from tests.operator.controller_world import (
    ACTORS,
    SCALED_OBJECTS,
    World,
    async_actor,
    has_queue,
    observed,
)

pytestmark = pytest.mark.rabbitmq


@pytest.fixture
async def teams(world, cluster, kube, broker_secret, used_namespaces):
    """The test's namespace N and a namespace N-a, each with its broker Secret."""
    other = World(cluster, kube, f"{world.namespace}-a")
    used_namespaces[other.namespace] = {"embed", "a-embed"}
    await other.create_secret("asya-broker", broker_secret)
    return world, other


async def transport_of(amqp_url: str, namespace: str) -> RabbitMQTransport:
    options = RabbitMQOptions(namespace=namespace, connection_name="test-isolation")
    return await RabbitMQTransport(amqp_url, options).__aenter__()


async def test_the_two_teams_get_a_queue_each_and_deleting_one_leaves_the_other(
    teams, operator, amqp_url
):
    ml, ml_a = teams
    # Given: ml's actor a-embed and ml-a's actor embed, both applied
    await ml.create_actor(async_actor("a-embed"))
    await ml_a.create_actor(async_actor("embed"))
    for world, name in ((ml, "a-embed"), (ml_a, "embed")):
        await world.wait_for(ACTORS, name, lambda o: observed(o) == 1, f"{name} applied")
    first = await transport_of(amqp_url, ml.namespace)
    second = await transport_of(amqp_url, ml_a.namespace)
    try:
        # Then: KEDA reads two queues
        scaled = [
            (await world.wait_exists(SCALED_OBJECTS, name))["spec"]["triggers"][0]["metadata"]
            for world, name in ((ml, "a-embed"), (ml_a, "embed"))
        ]
        assert [s["queueName"] for s in scaled] == [
            f"asya.{ml.namespace}.a-embed",
            f"asya.{ml_a.namespace}.embed",
        ]

        # When: each team sends to its own actor
        for _ in range(3):
            await first.publish("a-embed", b"{}")
        for _ in range(2):
            await second.publish("embed", b"{}")

        # Then: each queue holds its own team's envelopes, and only them
        assert (await first.depth("a-embed")).ready == 3
        assert (await second.depth("embed")).ready == 2

        # When: ml's actor is deleted
        await ml.delete_actor("a-embed")
        await ml.wait_for(ACTORS, "a-embed", lambda o: o is None, "a-embed gone")

        # Then: its queue is gone, the other team's queue is there with what it held
        assert not await has_queue(first, "a-embed")
        assert (await second.depth("embed")).ready == 2
    finally:
        await first.delete_queues({"a-embed", HAPPY_END, ERROR_END})
        await second.delete_queues({"embed", HAPPY_END, ERROR_END})
        await first.aclose()
        await second.aclose()
