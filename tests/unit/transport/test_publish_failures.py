"""A publish that aiormq fails by closing its own connection is the broker's failure.

When aiormq closes a connection itself (a missed heartbeat, a reader that ended), it fails
every publish still waiting for its confirm with the exception it was closed with:
`CancelledError`, or a bare `Exception`. Those are `TransportError` (the envelope goes back to
the queue, logged as a broker failure); a cancellation of the publishing task itself is passed
on as one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from asya.errors import TransportError
from asya.transport.base import reply_queue_name
from asya.transport.rabbitmq import RabbitMQTransport


class Underlay:
    """An aiormq channel whose publishes wait on futures the test fails."""

    def __init__(self) -> None:
        self.waiting: list[asyncio.Future[None]] = []
        self.sent = asyncio.Event()

    async def basic_publish(self, body: bytes, **_: Any) -> None:
        confirm = asyncio.get_running_loop().create_future()
        self.waiting.append(confirm)
        self.sent.set()
        await confirm


def transport_on(underlay: Underlay) -> RabbitMQTransport:
    transport = RabbitMQTransport("amqp://guest:guest@127.0.0.1:1/")

    async def publisher() -> Underlay:
        return underlay

    transport._publisher = publisher  # type: ignore[method-assign,assignment]
    return transport


async def failed_by_close(underlay: Underlay, exc: BaseException) -> None:
    await underlay.sent.wait()
    underlay.waiting[0].set_exception(exc)


SENDS = {
    "publish": lambda t: t.publish("next", b"{}"),
    "park": lambda t: t.park(b"{}", reason="error-end has no queue"),
}


@pytest.mark.parametrize("send", SENDS.values(), ids=SENDS.keys())
@pytest.mark.parametrize(
    "closed_with", [asyncio.CancelledError, Exception], ids=["CancelledError", "Exception"]
)
async def test_a_publish_failed_by_a_closing_connection_is_a_transport_error(send, closed_with):
    underlay = Underlay()
    transport = transport_on(underlay)

    with pytest.raises(TransportError, match="the connection closed"):
        await asyncio.gather(send(transport), failed_by_close(underlay, closed_with()))


REPLY_TO = reply_queue_name("default", "0" * 32)
ALL_SENDS = {**SENDS, "publish_reply": lambda t: t.publish_reply(REPLY_TO, b"{}")}


@pytest.mark.parametrize("send", ALL_SENDS.values(), ids=ALL_SENDS.keys())
@pytest.mark.parametrize("closing_too", [False, True], ids=["alone", "as-the-connection-closes"])
async def test_a_cancelled_publishing_task_stays_cancelled(send, closing_too):
    underlay = Underlay()
    transport = transport_on(underlay)
    task = asyncio.create_task(send(transport))
    await underlay.sent.wait()

    if closing_too:  # in the same loop step: the task's own cancellation wins
        underlay.waiting[0].set_exception(asyncio.CancelledError())
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_other_errors_are_not_taken_for_a_close():
    underlay = Underlay()
    transport = transport_on(underlay)

    with pytest.raises(ZeroDivisionError):
        await asyncio.gather(
            transport.publish("next", b"{}"), failed_by_close(underlay, ZeroDivisionError())
        )


async def test_a_reply_failed_by_a_closing_connection_is_logged_not_raised(caplog):
    underlay = Underlay()
    transport = transport_on(underlay)
    assert transport.options.namespace == "default"

    with caplog.at_level(logging.WARNING, logger="asya.transport.rabbitmq"):
        await asyncio.gather(
            transport.publish_reply(REPLY_TO, b"{}"),
            failed_by_close(underlay, asyncio.CancelledError()),
        )

    assert [r.getMessage() for r in caplog.records] == ["reply not sent: the connection closed"]


@pytest.mark.parametrize("send", SENDS.values(), ids=SENDS.keys())
async def test_a_channel_lost_to_a_closing_connection_while_reopened_is_a_transport_error(send):
    transport = RabbitMQTransport("amqp://guest:guest@127.0.0.1:1/")

    async def reopening() -> Underlay:
        raise Exception  # as aiormq fails what waits on a connection it closes itself

    transport._publisher = reopening  # type: ignore[method-assign,assignment]

    with pytest.raises(TransportError, match="the connection closed"):
        await send(transport)


@pytest.mark.parametrize(
    "closed_with", [asyncio.CancelledError, Exception], ids=["CancelledError", "Exception"]
)
async def test_a_record_failed_by_a_closing_connection_is_a_transport_error(closed_with):
    underlay = Underlay()
    store = RabbitMQTransport("amqp://guest:guest@127.0.0.1:1/")._records

    async def publisher() -> Underlay:
        return underlay

    store._publisher = publisher  # type: ignore[method-assign,assignment]
    publish = store._publish(b"{}", exchange="", routing_key="records", headers={})

    with pytest.raises(TransportError, match="the connection closed"):
        await asyncio.gather(publish, failed_by_close(underlay, closed_with()))
