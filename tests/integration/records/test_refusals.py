"""A broker that cannot keep end records stops an end actor at start, with what to change."""

from __future__ import annotations

import asyncio
import os
import sys

import aio_pika

from asya.routing import HAPPY_END
from asya.transport.records import RecordKind, records_stream_name


async def test_an_end_actor_sidecar_exits_2_naming_the_broker_version_and_the_setting(
    transport, amqp_url, namespace
):
    # A broker without streams refuses x-queue-type=stream with PRECONDITION_FAILED; a classic
    # queue already holding the stream's name is refused the same way on any broker.
    connection = await aio_pika.connect(amqp_url)
    channel = await connection.channel()
    await channel.declare_queue(records_stream_name(namespace, RecordKind.RESULTS), durable=True)
    await connection.close()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ASYA_")},
        "ASYA_BROKER_URL": amqp_url,
        "ASYA_NAMESPACE": namespace,
        "ASYA_ACTOR": HAPPY_END,
        "ASYA_HEALTH_PORT": "0",
    }

    sidecar = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "asya_sidecar.main", env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(sidecar.communicate(), 60)

    assert sidecar.returncode == 2
    message = err.decode()
    assert f"asya-{namespace}.results" in message
    assert "RabbitMQ 3." in message
    assert "ASYA_RECORDS_MAX_AGE" in message
