"""A batch actor (`@actor(batch=8)`) with poison among good messages: each good one succeeds,
each poison is recorded with its own reason, and no batch-mate pays for it."""

from __future__ import annotations

from asya.envelope import Reason
from tests.hostile.accounting import (
    MALFORMED,
    envelope_fields,
    failed,
    json_body,
    new_id,
    raw,
    valid,
)


def poisons(round_: int) -> list:
    big = json_body(envelope_fields(new_id("big"), "batcher", "BIG")).replace(
        b'"BIG"', str(2**64 + round_).encode()
    )
    return [
        raw(f"garbage {round_}", b"\xff\xfe poison %d" % round_),
        raw(f"2**64 {round_}", big),
        valid(f"wrong actor {round_}", "echo", round_, MALFORMED),
        valid(
            f"past deadline {round_}",
            "batcher",
            round_,
            failed(Reason.DEADLINE_EXCEEDED),
            status={"deadline_at": "2001-01-01T00:00:00"},
        ),
        valid(
            f"unencodable output {round_}", "batcher", {"poison": 1}, failed(Reason.INVALID_OUTPUT)
        ),
    ]


async def test_poison_in_a_batch_is_recorded_alone_and_its_batch_mates_succeed(feeder):
    await feeder.start("batcher")
    inputs = []
    for round_ in range(3):
        good = [valid(f"good {round_}-{i}", "batcher", {"n": i}) for i in range(6)]
        inputs += good[:3] + poisons(round_) + good[3:]

    result = await feeder.feed("batcher", inputs)

    assert result.problems == []
    assert (result.tried, result.recorded) == (33, 33)
    assert result.outcomes == {
        "happy-end": 18,
        "error-end:MalformedEnvelope": 9,
        "error-end:DeadlineExceeded": 3,
        "error-end:InvalidOutput": 3,
    }
