"""Client: put envelopes into a mesh and, if asked, wait for their final envelope.

`send` builds an envelope for a route and publishes it to the route's first actor (a first
actor with no queue fails loudly here, not later). `call` does the same with a private reply
queue named in the `reply_to` header and waits for the end actors to answer. Works over any
transport: the in-memory one in the local runner and tests, RabbitMQ in production —
`Client("amqp://...")` connects on first use and is closed by `async with` or `aclose()`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from datetime import timedelta

from asya.clock import Clock, SystemClock
from asya.envelope import (
    END_LIMITS,
    REPLY_TO_HEADER,
    Envelope,
    Limits,
    Payload,
    Route,
    Status,
    decode_envelope,
    encode_envelope,
    new_envelope_id,
)
from asya.errors import EnvelopeError, TransportError
from asya.routing import route_name_problem
from asya.transport.base import Transport


class Client:
    """Publishes envelopes to a mesh; see the module docstring."""

    def __init__(
        self,
        transport: Transport | str,
        *,
        namespace: str = "default",
        limits: Limits | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """`transport`: a Transport, or a broker URL (`namespace` then names the queues)."""
        self._transport = transport if not isinstance(transport, str) else None
        self._url = transport if isinstance(transport, str) else None
        self._namespace = namespace
        self._limits = limits or Limits()
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random()

    def envelope(
        self,
        route: Sequence[str],
        payload: Payload,
        *,
        headers: Mapping[str, str] | None = None,
        deadline: timedelta | None = None,
    ) -> Envelope:
        """A new envelope for `route`, ready to publish.

        Raises:
            EnvelopeError: the route is empty or names something that is not an actor.
        """
        if not route:
            raise EnvelopeError("route is empty: name at least one actor")
        for name in route:
            problem = route_name_problem(name)
            if problem is not None:
                raise EnvelopeError(f"route {list(route)}: {problem}")
        now = self._clock.now()
        return Envelope(
            id=new_envelope_id(now, self._rng),
            route=Route(curr=route[0], next=tuple(route[1:])),
            headers=dict(headers or {}),
            status=Status(
                created_at=now,
                updated_at=now,
                deadline_at=None if deadline is None else now + deadline,
            ),
            payload=payload,
        )

    async def __aenter__(self) -> Client:
        await self._connected()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection this client opened itself (a given transport stays open)."""
        if self._url is not None and self._transport is not None:
            await self._transport.aclose()
            self._transport = None

    async def _connected(self) -> Transport:
        if self._transport is None:
            assert self._url is not None
            try:
                # Imported here: a client over a given transport needs no broker client.
                from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
            except ImportError as exc:
                raise TransportError(
                    f"a broker URL needs the RabbitMQ client: pip install 'asya[rabbitmq]' ({exc})"
                ) from exc
            options = RabbitMQOptions(namespace=self._namespace, connection_name="asya-client")
            transport = RabbitMQTransport(self._url, options)
            await transport.connect()
            self._transport = transport
        return self._transport

    async def publish(self, envelope: Envelope) -> str:
        """Publish a built envelope to `route.curr`; returns its id.

        Raises:
            UnknownActorError: `route.curr` has no queue.
            PayloadTooLargeError: the payload is over the limit.
            EnvelopeError: the payload cannot be encoded as JSON.
            TransportError: the broker cannot be reached.
        """
        body = encode_envelope(envelope, self._limits)
        transport = await self._connected()
        await transport.publish(envelope.route.curr, body)
        return envelope.id

    async def send(
        self,
        route: Sequence[str],
        payload: Payload,
        *,
        headers: Mapping[str, str] | None = None,
        deadline: timedelta | None = None,
    ) -> str:
        """Publish `payload` along `route`; returns the envelope id. Raises as `publish`."""
        return await self.publish(self.envelope(route, payload, headers=headers, deadline=deadline))

    async def call(
        self,
        route: Sequence[str],
        payload: Payload,
        *,
        timeout_s: float,
        headers: Mapping[str, str] | None = None,
    ) -> Envelope:
        """Send and wait for the first final envelope (from `happy-end` or `error-end`).

        Raises:
            TimeoutError: no final envelope within `timeout_s`.
            and as `publish`.
        """
        reply = await (await self._connected()).open_reply_queue()
        try:
            merged = {**(headers or {}), REPLY_TO_HEADER: reply.name}
            deadline = timedelta(seconds=timeout_s)
            await self.send(route, payload, headers=merged, deadline=deadline)
            async with asyncio.timeout(timeout_s):
                body = await reply.receive()
            return decode_envelope(body, END_LIMITS)
        finally:
            await reply.close()
