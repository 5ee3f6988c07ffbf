"""A whole pipeline traced: one trace, a span per call in order, retries and fan-out visible."""

from __future__ import annotations

from asya import Context, RetryPolicy, actor
from asya.testing import arun

FAST_RETRY = RetryPolicy(max_attempts=3, base_delay_ms=1, jitter=0.0)


async def _split_flaky_store(spans):
    """split fans "a b" out into two children; flaky fails each child's first attempt; store
    ends each branch. Returns the finished spans, by span id."""

    @actor
    def split(text):
        yield from text.split()

    @actor(retry=FAST_RETRY)
    def flaky(word, ctx: Context):
        if ctx.attempt == 1:
            raise ConnectionError("try again")
        return word.upper()

    @actor
    def store(word):
        return word

    results = await arun([split, flaky, store], ["a b"], backoff=True)  # the policy's delays

    assert results.payloads == ["A", "B"]
    return {span.context.span_id: span for span in spans.get_finished_spans()}


def _path_to(span, by_id):
    """The spans from the root down to `span`, following parents."""
    path = []
    while span is not None:
        path.append(span)
        span = by_id.get(span.parent.span_id) if span.parent is not None else None
    return path[::-1]


async def test_every_call_of_every_envelope_is_a_span_of_one_trace(spans):
    by_id = await _split_flaky_store(spans)

    assert len({span.context.trace_id for span in by_id.values()}) == 1
    assert sorted(span.name for span in by_id.values()) == [
        *["flaky"] * 4,
        "split",
        *["store"] * 2,
    ]


async def test_the_spans_of_each_branch_follow_its_hops_in_order(spans):
    by_id = await _split_flaky_store(spans)

    leaves = [span for span in by_id.values() if span.name == "store"]
    assert len(leaves) == 2
    for leaf in leaves:
        path = _path_to(leaf, by_id)
        assert [
            (s.name, s.attributes["asya.attempt"], s.attributes["asya.outcome"]) for s in path
        ] == [
            ("split", 1, "succeeded"),
            ("flaky", 1, "retried"),
            ("flaky", 2, "succeeded"),
            ("store", 1, "succeeded"),
        ]
        starts = [s.start_time for s in path]
        assert starts == sorted(starts)
        assert all(s.attributes["asya.queue_wait_ms"] >= 0 for s in path)


async def test_a_retry_is_an_event_on_the_span_of_the_attempt_that_failed(spans):
    by_id = await _split_flaky_store(spans)

    failed = [s for s in by_id.values() if s.name == "flaky" and s.attributes["asya.attempt"] == 1]
    assert len(failed) == 2
    for span in failed:
        [event] = span.events
        assert event.name == "asya.retry"
        assert dict(event.attributes) == {
            "asya.attempt": 1,
            "asya.next_attempt": 2,
            "asya.delay_ms": 1,
            "asya.error.type": "builtins.ConnectionError",
            "asya.reason": "HandlerError",
        }


async def test_a_fan_out_child_is_a_child_span_of_the_call_that_yielded_it(spans):
    by_id = await _split_flaky_store(spans)

    [split] = [s for s in by_id.values() if s.name == "split"]
    firsts = [s for s in by_id.values() if s.name == "flaky" and s.attributes["asya.attempt"] == 1]
    assert [s.parent.span_id for s in firsts] == [split.context.span_id] * 2
    assert sorted(s.attributes["asya.envelope.id"] for s in firsts) == [
        f"{split.attributes['asya.envelope.id']}-1",
        f"{split.attributes['asya.envelope.id']}-2",
    ]
    assert {s.attributes["asya.envelope.parent_id"] for s in firsts} == {
        split.attributes["asya.envelope.id"]
    }


async def test_a_route_rewrite_is_an_event_on_the_span_of_the_call_that_rewrote_it(spans):
    @actor
    def triage(n, ctx: Context):
        ctx.route.next = ["urgent"]
        return n

    @actor
    def urgent(n):
        return n

    @actor
    def routine(n):
        return n

    await arun([triage, urgent, routine], [1], route=["triage", "routine"])

    [span] = [s for s in spans.get_finished_spans() if s.name == "triage"]
    [event] = span.events
    assert event.name == "asya.route.rewrite"
    assert dict(event.attributes) == {
        "asya.output": 1,
        "asya.route.next.before": ("routine",),
        "asya.route.next.after": ("urgent",),
    }
