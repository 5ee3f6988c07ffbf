"""`asya clean` against a real broker: it deletes a namespace's queues and streams, and only
those, and never one a consumer is attached to."""

from __future__ import annotations

import re

import pytest

from asya.routing import ERROR_END, HAPPY_END
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
from asya.transport.records import RecordKind
from tests.integration.cli.processes import QUICKSTART, ROOT, existing_queues, run_asya


async def asya_clean(*args: str, answer: str = "") -> tuple[int, str, str]:
    """`asya clean ARGS`, answering `answer` on stdin."""
    return await run_asya("clean", *args, answer=answer, timeout_s=120)


async def served(url: str, namespace: str, *actors: str) -> list[str]:
    """The queues `asya serve` leaves in `namespace` for `actors`, with a message in the first
    actor's queue and one waiting in its retry delay queue; their names."""
    options = RabbitMQOptions(namespace=namespace, connection_name="test-clean-setup")
    async with RabbitMQTransport(url, options) as transport:
        for actor in (*actors, HAPPY_END, ERROR_END):
            await transport.declare(actor)
        await transport.publish(actors[0], b"{}")
        await transport.publish(actors[0], b"{}", delay_ms=60_000)
        for kind in RecordKind:
            await transport.records.declare(kind)
        delay_queue = transport.delay_queue_for(actors[0], 60_000)
        return [
            *(transport.queue_for(a) for a in (*actors, HAPPY_END, ERROR_END)),
            delay_queue,
            transport.parking_queue,
            *(transport.records.stream(kind) for kind in RecordKind),
        ]


@pytest.fixture
def other_namespace(namespace, used_namespaces):
    """A namespace whose name starts with the test's namespace and a '-' (`ml` and `ml-a`)."""
    name = f"{namespace}-a"
    used_namespaces[name] = {"x"}
    return name


@pytest.fixture
def cleaned(namespace, used_namespaces):
    used_namespaces[namespace] = {"x", "a-x", *QUICKSTART_ACTORS}
    return namespace


QUICKSTART_ACTORS = ("normalize", "detect-language", "score", "split", "review")


async def test_clean_lists_then_deletes_every_queue_and_stream_of_the_namespace(amqp_url, cleaned):
    names = await served(amqp_url, cleaned, "x")

    code, out, err = await asya_clean(
        "--actors", "x", "--namespace", cleaned, "--broker", amqp_url, "--yes"
    )

    assert code == 0, err
    assert sorted(re.findall(r"^(asya\S+)\s+(\d+)\s+(\d+)$", out, re.M)) == sorted(
        (name, "1" if name.startswith(f"asya.{cleaned}.x") else "0", "0") for name in names
    )
    assert f"asya: deleted {len(names)} queue(s)" in err
    assert await existing_queues(amqp_url, names) == []


async def test_clean_refuses_while_a_consumer_is_attached_naming_it_and_deletes_nothing(
    amqp_url, cleaned
):
    names = await served(amqp_url, cleaned, "x")
    options = RabbitMQOptions(namespace=cleaned, connection_name="test-clean-consumer")
    async with RabbitMQTransport(amqp_url, options) as consumer:
        subscription = await consumer.subscribe("x", prefetch=1)

        code, _, err = await asya_clean(
            "--actors", "x", "--namespace", cleaned, "--broker", amqp_url, "--yes"
        )

        await subscription.close()
    assert code == 1
    assert f"consumers are attached to asya.{cleaned}.x (1)" in err
    assert "nothing deleted" in err
    assert await existing_queues(amqp_url, names) == names


async def test_clean_asks_first_and_deletes_nothing_unless_told_yes(amqp_url, cleaned):
    names = await served(amqp_url, cleaned, "x")

    code, _, err = await asya_clean(
        "--actors", "x", "--namespace", cleaned, "--broker", amqp_url, answer="n\n"
    )

    assert code == 1
    assert "delete these 8 queue(s) and the 2 message(s) they hold? [y/N]" in err
    assert await existing_queues(amqp_url, names) == names


async def test_clean_leaves_every_queue_of_a_namespace_its_name_prefixes(
    amqp_url, cleaned, other_namespace
):
    others = await served(amqp_url, other_namespace, "x")
    await served(amqp_url, cleaned, "x")

    code, _, err = await asya_clean(
        "--actors", "x", "--namespace", cleaned, "--broker", amqp_url, "--yes"
    )

    assert code == 0, err
    assert await existing_queues(amqp_url, others) == others


async def test_the_pair_that_once_shared_a_queue_name_is_cleaned_apart(
    amqp_url, cleaned, other_namespace
):
    # Namespace `N-a`'s actor `x` and namespace `N`'s actor `a-x` once shared a queue name.
    others = await served(amqp_url, other_namespace, "x")
    mine = await served(amqp_url, cleaned, "y", "a-x")

    code, out, err = await asya_clean(
        "--actors", "y,a-x", "--namespace", cleaned, "--broker", amqp_url, "--yes"
    )

    assert code == 0, err
    assert f"asya.{cleaned}.a-x " in out
    assert f"asya.{other_namespace}.x " not in out
    assert await existing_queues(amqp_url, others) == others
    assert await existing_queues(amqp_url, mine) == []


async def test_the_documented_clean_command_deletes_the_quickstart_queues(amqp_url, cleaned):
    page = (ROOT / "docs" / "serve.md").read_text(encoding="utf-8")
    [line] = re.findall(r"^asya clean examples/quickstart .*$", page, re.M)
    args = line.split()[2:]
    args[args.index("--namespace") + 1] = cleaned
    args[args.index("--broker") + 1] = amqp_url
    names = await served(amqp_url, cleaned, *QUICKSTART_ACTORS)

    code, _, err = await asya_clean(*args, answer="y\n")

    assert code == 0, err
    assert str(QUICKSTART).endswith(args[0])
    assert await existing_queues(amqp_url, names) == []
