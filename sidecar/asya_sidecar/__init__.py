"""The asya sidecar: owns an actor's queue, calls the runtime, routes, publishes, acks."""
