"""One actor's consumer on the memory transport, for tests that look at a single step."""

from __future__ import annotations

import asyncio

from asya import actor
from asya.actor import spec_of
from asya.envelope import Envelope, Limits, decode_envelope, encode_envelope
from asya.handler import LocalInvoker
from asya.hooks import combined
from asya.routing import ERROR_END, HAPPY_END
from asya.transport.memory import MemoryTransport
from tests.factories import FakeClock, Replica, rng


@actor
def echo(doc):
    """Sends its payload on unchanged."""
    return doc


async def step(handler, sent: Envelope | bytes, *, tracing, clock=None, to=HAPPY_END) -> Envelope:
    """Run `handler`'s consumer (with `tracing`) on `sent`; the envelope that reaches `to`."""
    spec = spec_of(handler)
    transport = MemoryTransport()
    for name in (spec.name, HAPPY_END, ERROR_END):
        await transport.declare(name)
    consumer = Replica(
        spec.config,
        transport=transport,
        invoker=LocalInvoker(spec),
        limits=Limits(),
        clock=clock or FakeClock(),
        rng=rng(),
        hooks=combined(tracing=tracing),
    )
    await consumer.start()
    try:
        body = sent if isinstance(sent, bytes) else encode_envelope(sent, Limits())
        await transport.publish(spec.name, body)
        subscription = await transport.subscribe(to, prefetch=1)
        message = await asyncio.wait_for(subscription.get(), 5)
        await subscription.ack(message)
        await subscription.close()
        return decode_envelope(message.body, Limits())
    finally:
        await consumer.stop(1)
        await transport.aclose()
