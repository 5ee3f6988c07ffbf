"""Transports move envelope bytes between actor queues: `base` is the interface, `memory` the
embedded default, `rabbitmq` the broker (extra `asya[rabbitmq]`)."""
