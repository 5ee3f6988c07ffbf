"""Actors as pods on a real broker: runtime and sidecar processes, envelopes end to end."""

from __future__ import annotations

import asyncio
import base64
import signal

import pytest

from asya import Client
from asya.envelope import Phase, Reason
from asya.errors import UnknownActorError

HANDLERS = """
import os, time
from asya import actor, Context, RetryPolicy

@actor
def upper(doc):
    return {**doc, "text": doc["text"].upper()}

@actor
def exclaim(doc):
    return {**doc, "text": doc["text"] + "!"}

@actor
async def count(doc):
    return {**doc, "length": len(doc["text"])}

@actor
def split(doc):
    for word in doc["text"].split():
        yield {"text": word}

@actor
def judge(doc, ctx: Context):
    if len(doc["text"]) < 5:
        ctx.route.next[:0] = ["exclaim"]
    return doc

@actor(retry=RetryPolicy(max_attempts=3, base_delay_ms=50, jitter=0))
def flaky(doc, ctx: Context):
    if ctx.attempt < doc["succeed_at"]:
        raise ConnectionError(f"attempt {ctx.attempt} failed")
    return {**doc, "attempt": ctx.attempt}

@actor(timeout_s=0.5, retry=RetryPolicy(max_attempts=1))
def sleepy(doc):
    time.sleep(doc["sleep_s"])
    return doc

@actor(concurrency=2)
def slow(doc):
    time.sleep(0.2)
    return doc
"""


async def test_an_envelope_travels_a_three_actor_route(pods, transport, finals):
    await pods(HANDLERS, "upper", "exclaim", "count")

    sent = await Client(transport).send(["upper", "exclaim", "count"], {"text": "hi"})
    [final] = await finals.wait_for(1)

    assert final.id == sent
    assert final.payload == {"text": "HI!", "length": 3}
    assert final.route.prev == ("upper", "exclaim", "count")
    assert final.status.phase is Phase.SUCCEEDED


async def test_a_generator_fans_out_children_to_the_end(pods, transport, finals):
    await pods(HANDLERS, "split", "upper")

    sent = await Client(transport).send(["split", "upper"], {"text": "a b c"})
    found = await finals.wait_for(3)

    assert sorted(e.id for e in found) == [f"{sent}-1", f"{sent}-2", f"{sent}-3"]
    assert sorted(e.payload["text"] for e in found) == ["A", "B", "C"]


async def test_a_handler_rewrites_the_route_at_runtime(pods, transport, finals):
    await pods(HANDLERS, "judge", "exclaim", "count")
    client = Client(transport)

    short = await client.send(["judge", "count"], {"text": "hey"})
    long = await client.send(["judge", "count"], {"text": "hello there"})
    await finals.wait_for(2)

    by_id = finals.by_id()
    assert by_id[short].route.prev == ("judge", "exclaim", "count")
    assert by_id[long].route.prev == ("judge", "count")


async def test_a_failing_call_is_retried_through_the_delay_queue_then_succeeds(
    pods, transport, finals
):
    await pods(HANDLERS, "flaky")

    await Client(transport).send(["flaky"], {"succeed_at": 3})
    [final] = await finals.wait_for(1)
    delay_queue = await transport.open_channel()
    declared = await delay_queue.declare_queue(transport.delay_queue_for("flaky", 50), passive=True)
    await delay_queue.close()

    assert final.status.phase is Phase.SUCCEEDED
    assert final.payload["attempt"] == 3
    assert declared.name.endswith(".retry-50ms")


async def test_when_retries_run_out_every_attempt_is_in_the_error_end_record(
    pods, transport, finals
):
    await pods(HANDLERS, "flaky")

    await Client(transport).send(["flaky"], {"succeed_at": 99})
    [final] = await finals.wait_for(1)

    status = final.status
    assert status.reason is Reason.HANDLER_ERROR
    assert (status.attempt, status.max_attempts) == (3, 3)
    assert [e.message for e in status.retries] == ["attempt 1 failed", "attempt 2 failed"]
    assert status.error.message == "attempt 3 failed"
    assert "raise ConnectionError" in status.error.traceback


async def test_a_route_naming_an_actor_without_a_queue_ends_as_unknown_actor(
    pods, transport, finals
):
    await pods(HANDLERS, "upper")

    await Client(transport).send(["upper", "translate"], {"text": "x"})
    [final] = await finals.wait_for(1)

    assert final.status.reason is Reason.UNKNOWN_ACTOR
    assert final.route.curr == "translate"
    assert final.payload == {"text": "X"}


async def test_sending_to_a_first_actor_without_a_queue_fails_at_the_client(transport):
    with pytest.raises(UnknownActorError):
        await Client(transport).send(["nobody-home"], {"text": "x"})


async def test_a_malformed_body_reaches_error_end_with_the_raw_body(pods, transport, finals):
    await pods(HANDLERS, "upper")

    await transport.publish("upper", b"\x00 not an envelope")
    await Client(transport).send(["upper"], {"text": "after"})
    found = await finals.wait_for(2)

    [bad] = [e for e in found if e.status.reason is Reason.MALFORMED_ENVELOPE]
    [good] = [e for e in found if e.status.phase is Phase.SUCCEEDED]
    assert base64.b64decode(bad.payload["body_base64"]) == b"\x00 not an envelope"
    assert good.payload == {"text": "AFTER"}


async def test_a_handler_past_its_timeout_ends_as_timeout_and_the_actor_goes_on(
    pods, transport, finals
):
    await pods(HANDLERS, "sleepy")
    client = Client(transport)

    stuck = await client.send(["sleepy"], {"sleep_s": 30})
    quick = await client.send(["sleepy"], {"sleep_s": 0})
    await finals.wait_for(2)

    by_id = finals.by_id()
    assert by_id[stuck].status.reason is Reason.TIMEOUT
    assert by_id[quick].status.phase is Phase.SUCCEEDED


async def test_sigterm_drains_in_flight_work_and_loses_nothing(pods, transport, finals):
    cluster = await pods(HANDLERS, "slow")
    client = Client(transport)
    sent = {await client.send(["slow"], {"n": n}) for n in range(12)}
    await finals.wait_for(2)

    sidecar = cluster.pods["slow"].sidecar
    sidecar.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(sidecar.wait(), 30)
    before_restart = len(finals.envelopes)
    await cluster.pods["slow"].start_sidecar()
    await finals.wait_for(len(sent))

    assert code == 0
    assert before_restart < len(sent)
    assert sent <= set(finals.by_id())
    assert all(e.status.phase is Phase.SUCCEEDED for e in finals.envelopes)


async def test_a_client_made_from_a_broker_url_calls_and_closes(pods, finals, amqp_url, namespace):
    await pods(HANDLERS, "upper", "count")

    async with Client(amqp_url, namespace=namespace) as client:
        final = (await client.call(["upper", "count"], {"text": "abc"}, timeout_s=30)).one()

    assert final.payload == {"text": "ABC", "length": 3}
    assert final.status.phase is Phase.SUCCEEDED
