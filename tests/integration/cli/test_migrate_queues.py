"""`asya migrate-queues` against a real broker: what queues of the old names hold reaches the
new ones, every message once, and nothing is moved that another namespace may own or that a
consumer still reads."""

from __future__ import annotations

import aio_pika
import pytest

from asya.errors import TransportError
from asya.queue_names import legacy_delay_queue_name, legacy_queue_name
from asya.routing import ERROR_END
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
from asya.transport.rabbitmq_namespace import NamespaceQueues
from tests.integration.cli.processes import existing_queues, run_asya


async def asya_migrate(*args: str, answer: str = "") -> tuple[int, str, str]:
    """`asya migrate-queues ARGS`, answering `answer` on stdin."""
    return await run_asya("migrate-queues", *args, answer=answer, timeout_s=120)


async def old_version(url: str, queues: dict[str, list[bytes]]) -> None:
    """Queues of the old names holding `queues`' bodies, as the old version left them."""
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        for name, bodies in queues.items():
            await channel.declare_queue(name, durable=True, arguments={"x-queue-type": "quorum"})
            for body in bodies:
                await channel.default_exchange.publish(aio_pika.Message(body), routing_key=name)


async def drained(url: str, queue: str) -> list[bytes]:
    """Every body in `queue`, taken out of it."""
    bodies = []
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        source = await channel.get_queue(queue, ensure=True)
        while (message := await source.get(fail=False)) is not None:
            bodies.append(message.body)
            await message.ack()
    return bodies


@pytest.fixture
def migrated(namespace, used_namespaces):
    used_namespaces[namespace] = {"x", "a-x"}
    return namespace


def bodies(prefix: str, count: int) -> list[bytes]:
    return [f'{{"{prefix}": {n}}}'.encode() for n in range(count)]


async def test_every_message_of_the_old_queues_reaches_the_new_queue_once(amqp_url, migrated):
    # Given: the old version's queue of `x` with 25 messages, 3 more waiting to be retried,
    # and 2 in error-end's old queue
    old, delay = legacy_queue_name(migrated, "x"), legacy_delay_queue_name(migrated, "x", 1000)
    errors = legacy_queue_name(migrated, ERROR_END)
    sent = {old: bodies("x", 25), delay: bodies("retry", 3), errors: bodies("failed", 2)}
    await old_version(amqp_url, sent)

    # When
    code, out, err = await asya_migrate(
        "--actors", "x", "--namespace", migrated, "--broker", amqp_url, "--yes"
    )

    # Then: each message once in its actor's new queue; the old queues are gone
    assert code == 0, err
    assert "asya: moved 30 message(s); deleted 3 old queue(s)" in err
    assert f"{old}  " in out
    assert f"{delay}  " in out
    assert sorted(await drained(amqp_url, f"asya.{migrated}.x")) == sorted(sent[old] + sent[delay])
    assert sorted(await drained(amqp_url, f"asya.{migrated}.error-end")) == sorted(sent[errors])
    assert await existing_queues(amqp_url, list(sent)) == []


async def holding(message: aio_pika.abc.AbstractIncomingMessage) -> None:
    """A consumer that keeps what it is given unacked (given back when its channel closes)."""


async def test_it_refuses_while_the_old_version_still_consumes_and_moves_nothing(
    amqp_url, migrated
):
    old = legacy_queue_name(migrated, "x")
    await old_version(amqp_url, {old: bodies("x", 3)})
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=1)
        queue = await channel.get_queue(old, ensure=True)
        await queue.consume(holding)  # an old sidecar, holding one message

        code, _, err = await asya_migrate(
            "--actors", "x", "--namespace", migrated, "--broker", amqp_url, "--yes"
        )

    assert code == 1
    assert f"consumers are attached to {old} (1)" in err
    assert "nothing moved" in err
    assert sorted(await drained(amqp_url, old)) == sorted(bodies("x", 3))


async def test_it_asks_first_and_moves_nothing_unless_told_yes(amqp_url, migrated):
    old = legacy_queue_name(migrated, "x")
    await old_version(amqp_url, {old: bodies("x", 4)})

    code, _, err = await asya_migrate(
        "--actors", "x", "--namespace", migrated, "--broker", amqp_url, answer="n\n"
    )

    assert code == 1
    assert "move the 4 message(s) of these 1 old queue(s) and delete them? [y/N]" in err
    assert sorted(await drained(amqp_url, old)) == sorted(bodies("x", 4))


async def test_an_old_name_another_namespace_may_own_is_kept_and_said_so(
    amqp_url, migrated, used_namespaces
):
    # Given: namespace N-a exists on the broker, and N's actor a-x had N-a's actor x's name
    other = f"{migrated}-a"
    used_namespaces[other] = {"x"}
    async with RabbitMQTransport(amqp_url, RabbitMQOptions(namespace=other)) as transport:
        await transport.declare(ERROR_END)  # declares N-a's parking queue with it
    shared = legacy_queue_name(migrated, "a-x")
    await old_version(amqp_url, {shared: bodies("either", 2)})

    code, out, _ = await asya_migrate(
        "--actors", "a-x", "--namespace", migrated, "--broker", amqp_url, "--yes"
    )

    assert code == 1
    assert f"kept: {shared} may also be namespace '{other}''s" in out
    assert sorted(await drained(amqp_url, shared)) == sorted(bodies("either", 2))


async def test_a_move_cut_short_by_the_broker_loses_no_message(amqp_url, migrated):
    # Given: an old queue of 10, and a transport whose 5th publish is refused
    old = legacy_queue_name(migrated, "x")
    await old_version(amqp_url, {old: bodies("x", 10)})
    options = RabbitMQOptions(namespace=migrated, connection_name="test-migrate-fault")
    async with RabbitMQTransport(amqp_url, options) as transport:
        await transport.declare("x")
        publish, calls = transport.publish, []

        async def refused_on_the_fifth(actor: str, body: bytes, *, delay_ms: int = 0) -> None:
            calls.append(body)
            if len(calls) == 5:
                raise TransportError("publish to 'x' was not confirmed: refused on purpose")
            await publish(actor, body, delay_ms=delay_ms)

        transport.publish = refused_on_the_fifth  # type: ignore[method-assign]
        queues = NamespaceQueues(transport)

        # When
        with pytest.raises(TransportError, match="refused on purpose"):
            await queues.move(old, "x")
        await queues.aclose()

    # Then: 4 moved, the refused one and the 5 after it still in the old queue
    moved = await drained(amqp_url, f"asya.{migrated}.x")
    left = await drained(amqp_url, old)
    assert len(moved) == 4
    assert sorted(moved + left) == sorted(bodies("x", 10))
