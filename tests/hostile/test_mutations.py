"""Structural and type mutations of a valid envelope, drawn by hypothesis.

Each mutation kind carries its literal outcome: a mutation that breaks the envelope's schema is
`MalformedEnvelope` (recorded by the hash of its body); one the schema allows travels to
`happy-end` with its id, unless it is past the hop limit or its deadline. The inputs are drawn
up front from a seeded strategy (a `@given` that only collects), then fed at once: an async
test cannot run a pod per example.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from asya.envelope import Reason
from tests.hostile.accounting import HAPPY, MALFORMED, Expect, Hostile, failed, json_body, raw

DROP = object()
EXAMPLES = 80
NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
HOPS = failed(Reason.HOP_LIMIT_EXCEEDED)
LATE = failed(Reason.DEADLINE_EXCEEDED)

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
not_strings = (
    st.integers(-(2**63), 2**63)
    | st.booleans()
    | st.none()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.lists(st.integers(0, 9), max_size=2)
    | st.dictionaries(st.just("k"), st.integers(0, 9), max_size=1)
)
not_names = text.filter(lambda s: not (NAME.fullmatch(s) and len(s) <= 53))
wide_ints = st.integers(2**64, 2**200) | st.integers(-(2**200), -(2**63) - 1)
known = {"id", "parent_id", "route", "headers", "status", "payload"}
PHASES = {"pending", "processing", "retrying", "succeeded", "failed"}
REASONS = {reason.value for reason in Reason}


def _moments(first: int, last: int) -> st.SearchStrategy[str]:
    # Naive (read as UTC) and with an offset.
    moments = st.datetimes(min_value=datetime(first, 1, 1), max_value=datetime(last, 1, 1))
    return moments.map(lambda d: d.isoformat()) | moments.map(lambda d: d.isoformat() + "+05:30")


def mutation(path: str, values, expect: Expect) -> st.SearchStrategy:
    return st.tuples(st.just(path), values, st.just(expect))


MUTATIONS = st.one_of(
    # The schema refuses these.
    mutation("id", st.just(DROP), MALFORMED),
    mutation("route", st.just(DROP), MALFORMED),
    mutation("route.curr", st.just(DROP), MALFORMED),
    mutation("id", not_strings, MALFORMED),
    mutation("id", st.text(min_size=257, max_size=400), MALFORMED),
    mutation("id", st.just(""), MALFORMED),
    mutation("route", not_strings | text, MALFORMED),
    mutation("route.curr", not_names | not_strings, MALFORMED),
    mutation("route.next", st.lists(not_names | not_strings, min_size=1, max_size=3), MALFORMED),
    mutation("route.next", text | st.integers(), MALFORMED),
    mutation("route.prev", st.lists(not_strings, min_size=1, max_size=3), MALFORMED),
    mutation("headers", st.dictionaries(text, not_strings, min_size=1, max_size=3), MALFORMED),
    mutation("headers", st.lists(text, max_size=2) | st.integers(), MALFORMED),
    mutation("status", not_strings.filter(lambda v: v is not None) | text, MALFORMED),
    mutation("status.phase", text.filter(lambda s: s not in PHASES) | not_strings, MALFORMED),
    mutation("status.attempt", st.integers(-(2**63), 0) | text | st.floats(0.5, 9.5), MALFORMED),
    mutation("status.reason", text.filter(lambda s: s not in REASONS), MALFORMED),
    mutation("status.created_at", text | st.integers(), MALFORMED),
    mutation("status.retries", text | st.lists(st.integers(), min_size=1, max_size=2), MALFORMED),
    mutation("parent_id", not_strings.filter(lambda v: v is not None), MALFORMED),
    mutation("payload.big", wide_ints, MALFORMED),
    # The schema allows these.
    mutation(
        "id", st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=200), HAPPY
    ),
    mutation("route.prev", st.lists(text, max_size=63), HAPPY),
    mutation(
        "headers", st.dictionaries(text.filter(lambda s: s != "reply_to"), text, max_size=5), HAPPY
    ),
    mutation("payload", json_values, HAPPY),
    mutation(
        "extra",
        st.dictionaries(text.filter(lambda s: s not in known), json_values, min_size=1, max_size=3),
        HAPPY,
    ),
    mutation("status.phase", st.sampled_from(sorted(PHASES)), HAPPY),
    mutation("status.attempt", st.integers(1, 2**63 - 1), HAPPY),
    mutation("status.deadline_at", _moments(2100, 2999), HAPPY),
    mutation("parent_id", text, HAPPY),
    mutation("route.prev", st.lists(st.text(max_size=5), min_size=64, max_size=80), HOPS),
    mutation("status.deadline_at", _moments(1971, 2020), LATE),
)


def drawn(strategy: st.SearchStrategy, count: int, seed_value: int) -> list:
    """`count` examples of `strategy`, the same on every run (a @given that only collects)."""
    found: list = []

    @seed(seed_value)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: Any) -> None:
        found.append(value)

    collect()
    return found


def mutated(index: int, path: str, value: Any, expect: Expect) -> Hostile:
    envelope_id = f"mutated-{index}-{path}"
    fields: dict[str, Any] = {
        "id": envelope_id,
        "route": {"curr": "echo", "prev": [], "next": []},
        "headers": {},
        "status": {"phase": "pending", "attempt": 1},
        "payload": {"n": index},
    }
    if path == "extra":
        fields.update(value)
    elif path == "id" and expect == HAPPY:
        envelope_id = f"{value}~{index}"
        fields["id"] = envelope_id
    else:
        *parents, leaf = path.split(".")
        target = fields
        for parent in parents:
            target = target[parent]
        if value is DROP:
            del target[leaf]
        else:
            target[leaf] = value
    label = f"#{index} {path}={'<dropped>' if value is DROP else repr(value)[:80]}"
    body = json_body(fields)
    if expect == MALFORMED:
        return raw(label, body)
    return Hostile(label, body, expect, envelope_id)


async def test_mutated_envelopes_are_malformed_or_travel_as_their_schema_says(feeder):
    await feeder.start("echo")
    inputs = [mutated(i, *drawn_) for i, drawn_ in enumerate(drawn(MUTATIONS, EXAMPLES, 1206))]

    result = await feeder.feed("echo", inputs)

    assert result.problems == []
    assert (result.tried, result.recorded) == (EXAMPLES, EXAMPLES)
