"""Run a whole mesh on one machine: discover actors, scale workers by queue depth, feed inputs,
record results (`asya dev`)."""
