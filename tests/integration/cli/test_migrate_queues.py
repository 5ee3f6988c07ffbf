"""`asya migrate-queues` against a real broker: what queues of the old names hold reaches the
new ones, every message once, and nothing is moved that another namespace may own or that a
consumer still reads."""

from __future__ import annotations

import asyncio

import aio_pika
import pytest

from asya.cli import migrate_queues
from asya.cli.migrate_queues import OldQueue
from asya.errors import TransportError
from asya.queue_names import legacy_delay_queue_name, legacy_queue_name
from asya.routing import ERROR_END
from asya.transport.rabbitmq import EXCHANGE, RabbitMQOptions, RabbitMQTransport
from asya.transport.rabbitmq_namespace import NamespaceQueues, QueueState
from tests.integration.cli.processes import existing_queues, run_asya


async def asya_migrate(*args: str, answer: str = "") -> tuple[int, str, str]:
    """`asya migrate-queues ARGS`, answering `answer` on stdin."""
    return await run_asya("migrate-queues", *args, answer=answer, timeout_s=120)


async def old_version(
    url: str, queues: dict[str, list[bytes]], *, delay_ms: dict[str, int] | None = None
) -> None:
    """Queues of the old names holding `queues`' bodies, as the old version left them: each
    a quorum queue bound to the `asya` exchange under its name, or (in `delay_ms`) a classic
    delay queue that dead-letters there under its actor's old name."""
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.declare_exchange(
            EXCHANGE, aio_pika.ExchangeType.DIRECT, durable=True
        )
        for name, bodies in queues.items():
            if delay_ms and name in delay_ms:
                arguments = {
                    "x-message-ttl": delay_ms[name],
                    "x-dead-letter-exchange": EXCHANGE,
                    "x-dead-letter-routing-key": name.rsplit("-retry-", 1)[0],
                }
                await channel.declare_queue(name, durable=True, arguments=arguments)
            else:
                queue = await channel.declare_queue(
                    name, durable=True, arguments={"x-queue-type": "quorum"}
                )
                await queue.bind(exchange, routing_key=name)
            for body in bodies:
                await channel.default_exchange.publish(aio_pika.Message(body), routing_key=name)


class OldClient:
    """An old version's client publishing as it did (through the `asya` exchange under the
    old queue name, or by name to an old delay queue), with confirms and returns: what the
    broker confirmed, and what came back unroutable."""

    def __init__(self, url: str) -> None:
        self._url = url
        self.confirmed: list[bytes] = []
        self.returned: list[bytes] = []

    async def __aenter__(self) -> OldClient:
        self._connection = await aio_pika.connect(self._url)
        channel = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
        self._exchange = await channel.get_exchange(EXCHANGE)
        self._default = channel.default_exchange
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._connection.close()

    async def publish(self, queue: str, body: bytes, *, by_name: bool = False) -> None:
        exchange = self._default if by_name else self._exchange
        try:
            await exchange.publish(aio_pika.Message(body), routing_key=queue, mandatory=True)
        except aio_pika.exceptions.DeliveryError:
            self.returned.append(body)
        else:
            self.confirmed.append(body)


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


@pytest.mark.parametrize("kind", ["actor queue", "delay queue"])
async def test_a_message_an_old_client_publishes_just_before_the_delete_is_not_lost(
    amqp_url, migrated, monkeypatch, kind
):
    # The old command drained, found the queue empty, then deleted it: a message confirmed to
    # an old client between the check and the delete went with the queue. Here that message
    # is published at the last moment: just before each call that deletes.
    old = legacy_queue_name(migrated, "x")
    delay = legacy_delay_queue_name(migrated, "x", 1000)
    target = old if kind == "actor queue" else delay
    await old_version(amqp_url, {old: bodies("x", 3), delay: []}, delay_ms={delay: 60_000})
    moving = [old] if kind == "actor queue" else [delay, old]
    late = b'{"late": 1}'
    async with OldClient(amqp_url) as client:
        for method in ("delete", "delete_if_empty"):
            deleting = getattr(NamespaceQueues, method)

            async def published_first(self, name, _deleting=deleting):
                if name == target and late not in client.confirmed + client.returned:
                    await client.publish(target, late, by_name=target == delay)
                return await _deleting(self, name)

            monkeypatch.setattr(NamespaceQueues, method, published_first)
        options = RabbitMQOptions(namespace=migrated, connection_name="test-migrate-late")
        transport = RabbitMQTransport(amqp_url, options)

        # When
        _moved, kept = await migrate_queues._move(
            transport,
            [OldQueue(QueueState(name, 0, 0), actor="x", shared_with=None) for name in moving],
        )

    # Then: the late message was either confirmed and moved, or handed back to its sender
    assert late in client.confirmed + client.returned
    new = await drained(amqp_url, f"asya.{migrated}.x")
    assert sorted(new) == sorted(bodies("x", 3) + client.confirmed)
    assert kept == []
    assert await existing_queues(amqp_url, moving) == []


async def test_an_old_client_publishing_throughout_the_migration_loses_no_confirmed_message(
    amqp_url, migrated
):
    # Given: an old queue with a backlog, and an old client that keeps publishing to it
    old = legacy_queue_name(migrated, "x")
    await old_version(amqp_url, {old: bodies("backlog", 200)})
    done = asyncio.Event()

    async def publishing(client: OldClient) -> None:
        count = 0
        while not done.is_set() or count < 5:  # and a few after: all returned by then
            await client.publish(old, f'{{"during": {count}}}'.encode())
            count += 1
        assert count < 100_000, "the migration never ended"

    # When
    async with OldClient(amqp_url) as client:
        publisher = asyncio.create_task(publishing(client))
        try:
            code, _, err = await asya_migrate(
                "--actors", "x", "--namespace", migrated, "--broker", amqp_url, "--yes"
            )
        finally:
            done.set()
            await publisher

    # Then: every message the broker confirmed is in the new queue, once; the rest came back
    assert code == 0, err
    new = await drained(amqp_url, f"asya.{migrated}.x")
    assert sorted(new) == sorted(bodies("backlog", 200) + client.confirmed)
    assert len(client.returned) >= 5
    assert await existing_queues(amqp_url, [old]) == []


async def test_an_old_queue_that_gains_a_consumer_as_it_is_deleted_is_kept_and_bound_again(
    amqp_url, migrated, monkeypatch
):
    # Given: an old pod starts consuming the old queue just as the command would delete it
    old = legacy_queue_name(migrated, "x")
    await old_version(amqp_url, {old: bodies("x", 2)})
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        deleting = NamespaceQueues.delete_if_empty

        async def consumed_first(self, name):
            queue = await channel.get_queue(old, ensure=True)
            await queue.consume(holding)
            return await deleting(self, name)

        monkeypatch.setattr(NamespaceQueues, "delete_if_empty", consumed_first)
        options = RabbitMQOptions(namespace=migrated, connection_name="test-migrate-consumed")

        # When
        _moved, kept = await migrate_queues._move(
            RabbitMQTransport(amqp_url, options),
            [OldQueue(QueueState(old, 2, 0), actor="x", shared_with=None)],
        )

        # Then: kept, and an old client's publish reaches it again through the exchange
        assert kept == [old]
        async with OldClient(amqp_url) as client:
            await client.publish(old, b'{"after": 1}')
        assert client.confirmed == [b'{"after": 1}']
    assert sorted(await drained(amqp_url, f"asya.{migrated}.x")) == sorted(bodies("x", 2))
    assert await drained(amqp_url, old) == [b'{"after": 1}']
    cleanup = await aio_pika.connect(amqp_url)
    async with cleanup:
        await (await cleanup.channel()).queue_delete(old)
