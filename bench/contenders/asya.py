"""asya as pods (a runtime and a sidecar process per actor) and in one process (`asya serve`).

Both run the actors of `bench.apps.asya_hops` on asya's own topology (exchange `asya`, a queue
per actor in a namespace of the run's own, of the run's queue type: quorum queues carry
asya's delivery limit). The benchmark's sink reads `happy-end`'s queue, and `error-end`'s for
failures, in place of the end actors: the end actors' own work (appending to a stream) is not
what is compared.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from asya import Client
from asya.envelope import Limits, encode_envelope
from asya.routing import ERROR_END, HAPPY_END
from asya.transport.rabbitmq import EXCHANGE, QueueType, RabbitMQOptions, RabbitMQTransport
from bench.contenders.base import PYTHON, Setup
from bench.procs import Launch, ProcessGroup
from bench.traffic import Outgoing, Payload

HOPS_MODULE = "bench.apps.asya_hops"


class AsyaWire:
    """asya envelopes along a route, from the route's first actor to `happy-end`."""

    def __init__(self, transport: RabbitMQTransport, route: Sequence[str], url: str) -> None:
        self.exchange = EXCHANGE
        self.routing_key = transport.queue_for(route[0])
        self.done_queues = [transport.queue_for(HAPPY_END)]
        self.failed_queues = [transport.queue_for(ERROR_END)]
        self._route = list(route)
        self._client = Client(url)  # builds envelopes only: it never connects
        self._limits = Limits()

    def wrap(self, payload: Payload) -> Outgoing:
        envelope = self._client.envelope(self._route, payload)
        return Outgoing(encode_envelope(envelope, self._limits))

    def unwrap(self, body: bytes) -> Payload:
        value = json.loads(body)["payload"]
        if not isinstance(value, dict):
            raise ValueError("payload is not an object")
        return value


@dataclass(frozen=True)
class Actor:
    name: str
    handler: str
    """`module:attr`, as `ASYA_HANDLER` takes it."""
    overrides: str | None = None
    """`ASYA_ACTOR_OVERRIDES` (JSON), for the batch actor's size and wait."""
    env: Mapping[str, str] = field(default_factory=dict)
    """More of the runtime's environment (the batch actor's cost)."""


class _AsyaContender:
    """Declares the namespace's queues and deletes them; subclasses start the processes."""

    name = "asya"

    def __init__(self, setup: Setup, actors: Sequence[Actor]) -> None:
        self.setup = setup
        self.actors = list(actors)
        self.namespace = setup.prefix
        self.transport = RabbitMQTransport(
            setup.url,
            RabbitMQOptions(
                namespace=self.namespace,
                queue_type=QueueType(setup.queue_type),
                connection_name=f"bench-{self.name}",
            ),
        )
        self.processes = ProcessGroup(setup.workdir)
        self.wire = AsyaWire(self.transport, [a.name for a in self.actors], setup.url)
        self.notes: list[str] = []

    def asya_env(self) -> dict[str, str]:
        return self.setup.env(
            {
                "ASYA_BROKER_URL": self.setup.url,
                "ASYA_NAMESPACE": self.namespace,
                "ASYA_QUEUE_TYPE": self.setup.queue_type,
                "BENCH_HOPS": str(self.setup.hops),
                "BENCH_INFLIGHT": str(self.setup.inflight),
            }
        )

    async def start(self) -> None:
        await self.transport.connect()
        for name in (*(a.name for a in self.actors), HAPPY_END, ERROR_END):
            await self.transport.declare(name)
        self.launch()

    def launch(self) -> None:
        raise NotImplementedError

    async def stop(self) -> list[str]:
        killed = await self.processes.stop()
        await self.transport.delete_queues([*(a.name for a in self.actors), HAPPY_END, ERROR_END])
        await self.transport.aclose()
        return killed


def hop_actors(setup: Setup) -> list[Actor]:
    return [Actor(name, f"{HOPS_MODULE}:{name.replace('-', '_')}") for name in setup.hop_names]


class AsyaPods(_AsyaContender):
    """Per actor, `python -m asya.runtime` (which starts its worker process) and a sidecar."""

    name = "asya-pods"

    def __init__(self, setup: Setup, actors: Sequence[Actor] | None = None) -> None:
        super().__init__(setup, hop_actors(setup) if actors is None else actors)

    def launch(self) -> None:
        base = self.asya_env()
        for actor in self.actors:
            pod = {
                **base,
                "ASYA_ACTOR": actor.name,
                "ASYA_SOCKET_PATH": str(self.setup.workdir / f"{actor.name}.sock"),
                "ASYA_HEALTH_PORT": "0",
            }
            runtime = {**pod, **actor.env, "ASYA_HANDLER": actor.handler}
            if actor.overrides is not None:
                runtime["ASYA_ACTOR_OVERRIDES"] = actor.overrides
            self.processes.start(
                Launch(
                    "runtime",
                    [PYTHON, "-m", "asya.runtime"],
                    runtime,
                    child_role="runtime-worker",
                    label=actor.name,
                )
            )
            self.processes.start(
                Launch("sidecar", [PYTHON, "-m", "asya_sidecar.main"], pod, label=actor.name)
            )


class AsyaServe(_AsyaContender):
    """Every hop in one `asya serve` process (end actors left to the benchmark's sink)."""

    name = "asya-serve"

    def __init__(self, setup: Setup) -> None:
        super().__init__(setup, hop_actors(setup))
        self.notes = ["one replica per actor (min_replicas = max_replicas = 1)"]

    def launch(self) -> None:
        argv = [
            PYTHON,
            "-m",
            "asya.cli",
            "serve",
            HOPS_MODULE,
            "--actors",
            ",".join(a.name for a in self.actors),
            "--no-ends",
            "--status-every",
            "0",
        ]
        self.processes.start(Launch("serve", argv, self.asya_env()))
