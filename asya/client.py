"""Client: put envelopes into a mesh and, if asked, wait for their final envelopes.

`send` builds an envelope for a route and publishes it to the route's first actor (a first
actor with no queue fails loudly here, not later). `call` does the same with a private reply
queue named in the `reply_to` header and waits until *every* envelope descending from it is
final — a generator on the way fans out into children, each ending on its own — and returns
them all as `Results` (`results.one()` for a call that ends in one envelope). When the tree is
complete is told by the finals' lineages (`asya.lineage`), so
it works over any transport: the in-memory one in the local runner and tests, RabbitMQ in
production — `Client("amqp://...")` connects on first use and is closed by `async with` or
`aclose()`.

    async with Client("amqp://guest:guest@localhost/") as client:
        results = await client.call(["split", "score"], {"text": long_text}, timeout_s=60)
    for failed in results.failed:
        print(failed.id, failed.status.reason)
    scores = [final.payload["score"] for final in results.succeeded]
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from asya.clock import Clock, SystemClock
from asya.envelope import (
    END_LIMITS,
    REPLY_TO_HEADER,
    Envelope,
    Limits,
    Payload,
    Phase,
    Reason,
    Route,
    Status,
    decode_envelope,
    encode_envelope,
    new_envelope_id,
)
from asya.errors import AsyaError, EnvelopeError, TransportError
from asya.lineage import Completion, path_of
from asya.routing import route_name_problem
from asya.transport.base import ReplyQueue, Transport


@dataclass(frozen=True)
class Results:
    """Final envelopes — of one call (in tree order: `<id>-1` before `<id>-2`) or of a run."""

    finals: tuple[Envelope, ...]

    def __len__(self) -> int:
        return len(self.finals)

    def __iter__(self) -> Iterator[Envelope]:
        return iter(self.finals)

    @property
    def succeeded(self) -> tuple[Envelope, ...]:
        """The finals that reached `happy-end`."""
        return tuple(f for f in self.finals if f.status.phase is Phase.SUCCEEDED)

    @property
    def failed(self) -> tuple[Envelope, ...]:
        """The finals that reached `error-end` (each with its `status.reason`)."""
        return tuple(f for f in self.finals if f.status.phase is not Phase.SUCCEEDED)

    @property
    def ok(self) -> bool:
        """Whether every final succeeded."""
        return not self.failed

    @property
    def payloads(self) -> list[Payload]:
        """The payloads of the finals that succeeded, in order."""
        return [f.payload for f in self.succeeded]

    def by_reason(self) -> dict[Reason | None, tuple[Envelope, ...]]:
        """The finals grouped by `status.reason`; those that succeeded are under None."""
        grouped: dict[Reason | None, list[Envelope]] = {}
        for final in self.finals:
            reason = None if final.status.phase is Phase.SUCCEEDED else final.status.reason
            grouped.setdefault(reason, []).append(final)
        return {reason: tuple(finals) for reason, finals in grouped.items()}

    def one(self) -> Envelope:
        """The only final.

        Raises:
            ManyFinalsError: there are several (the call fanned out); `error.results` has them.
        """
        if len(self.finals) != 1:
            raise ManyFinalsError(
                f"expected one final envelope, got {len(self.finals)} (a generator on the"
                " route fanned out): iterate the Results to get them all",
                results=self,
            )
        return self.finals[0]


class ManyFinalsError(AsyaError):
    """`Results.one()` found several final envelopes (a fan-out); `results` holds them all."""

    def __init__(self, message: str, *, results: Results) -> None:
        super().__init__(message)
        self.results = results


class CallTimeoutError(AsyaError, TimeoutError):
    """A call's envelopes were not all final within its timeout.

    `results` holds the finals that did arrive; `covered` is the share of the call's fan-out
    tree they account for (0 to 1). Also a `TimeoutError`.
    """

    def __init__(self, message: str, *, results: Results, covered: float) -> None:
        super().__init__(message)
        self.results = results
        self.covered = covered


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
    ) -> Results:
        """Send and wait until every envelope descending from it is final; return them all.

        The envelope's `deadline_at` is `timeout_s` from now, so what has not run by then ends
        in `error-end` (`DeadlineExceeded`) instead of running for nobody. A handler that
        removes the `reply_to` header from its envelope's headers leaves the call waiting.

        Raises:
            CallTimeoutError: not every envelope was final within `timeout_s`; the error holds
                the finals that came.
            and as `publish`.
        """
        reply = await (await self._connected()).open_reply_queue()
        try:
            merged = {**(headers or {}), REPLY_TO_HEADER: reply.name}
            deadline = timedelta(seconds=timeout_s)
            sent = self.envelope(route, payload, headers=merged, deadline=deadline)
            await self.publish(sent)
            return await _collect(reply, sent.id, timeout_s)
        finally:
            await reply.close()


async def _collect(reply: ReplyQueue, root_id: str, timeout_s: float) -> Results:
    """Read finals of the call `root_id` from `reply` until its tree is complete."""
    completion = Completion()
    finals: list[Envelope] = []
    try:
        async with asyncio.timeout(timeout_s):
            while not completion.is_complete:
                final = decode_envelope(await reply.receive(), END_LIMITS)
                is_ours = final.id == root_id or final.id.startswith(f"{root_id}-")
                if is_ours and completion.add(final.lineage):
                    finals.append(final)
    except TimeoutError as exc:
        covered = completion.covered
        raise CallTimeoutError(
            f"call {root_id}: {len(finals)} final envelope(s) within {timeout_s} s, accounting"
            f" for {float(covered):.0%} of its fan-out tree; the rest are still running or lost",
            results=Results(_in_tree_order(finals)),
            covered=float(covered),
        ) from exc
    return Results(_in_tree_order(finals))


def _in_tree_order(finals: list[Envelope]) -> tuple[Envelope, ...]:
    return tuple(sorted(finals, key=lambda final: path_of(final.lineage)))
