"""What the contenders' own processes run: asya actors, a raw aio-pika hop, Dramatiq actors and
Celery tasks, each configured from `BENCH_*` environment variables set by the benchmark."""
