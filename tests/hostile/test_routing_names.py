"""Routing-key injection in actor names, and unroutable publishes in a burst of good ones.

A name in `route.curr` or `route.next` becomes a routing key (`asya-{namespace}-{name}`), so a
name with `.`, `#`, `*`, spaces or capitals, an end actor's name or one that spells another
queue must never reach a queue it names: it is refused at decoding (`MalformedEnvelope`) or at
routing (`UnknownActor`), each input recorded once.
"""

from __future__ import annotations

from asya.envelope import Reason
from tests.hostile.accounting import MALFORMED, failed, json_body, new_id, raw, valid

UNKNOWN = failed(Reason.UNKNOWN_ACTOR)
INJECTED = ["echo.x", "#", "*", "echo #", "a b", "ECHO", "Echo", "x" * 54, "-echo", "echo-", ""]
"""Names that are not actor names (DNS-1123 labels of at most 53 characters)."""
NO_QUEUE = ["happy-end", "error-end", "asya-x-y", "x" * 53, "nobody", "router-retry-50ms"]
"""Valid-looking names that no actor owns (or that an end actor owns)."""
NOT_NAMES = [5, None, ["echo"], {"to": "echo"}]
"""What a handler may take from its input and put in `route.next`: not strings at all."""


def in_the_envelope() -> list:
    inputs = []
    for name in INJECTED:
        curr = json_body({"id": new_id("curr"), "route": {"curr": name}})
        inputs.append(raw(f"route.curr {name!r}", curr))
        after = json_body({"id": new_id("next"), "route": {"curr": "echo", "next": [name]}})
        inputs.append(raw(f"route.next {name!r}", after))
    for name in NO_QUEUE:
        # A valid name, but not this actor's: the envelope was delivered to the wrong actor.
        inputs.append(valid(f"route.curr {name!r} at echo", name, expect=MALFORMED))
        inputs.append(valid(f"route.next {name!r}", "echo", 1, next=[name], expect=UNKNOWN))
    return inputs


INVALID_OUTPUT = failed(Reason.INVALID_OUTPUT)


def chosen_by_the_handler() -> list:
    names = [
        valid(f"the handler routes to {name!r}", "router", {"to": name}, expect=UNKNOWN)
        for name in [*INJECTED, *NO_QUEUE]
    ]
    # Not names at all: the call fails as InvalidOutput (and no worker dies decoding them).
    return names + [
        valid(f"the handler routes to {name!r}", "router", {"to": name}, expect=INVALID_OUTPUT)
        for name in NOT_NAMES
    ]


async def test_injected_names_in_the_route_are_refused_and_recorded_once(feeder):
    await feeder.start("echo")

    result = await feeder.feed("echo", in_the_envelope())

    assert result.problems == []
    assert (result.tried, result.recorded) == (34, 34)
    assert result.outcomes == {"error-end:MalformedEnvelope": 28, "error-end:UnknownActor": 6}


async def test_injected_names_a_handler_routes_to_are_unknown_actors(feeder):
    await feeder.start("router", "echo")

    result = await feeder.feed("router", chosen_by_the_handler())

    assert result.problems == []
    assert (result.tried, result.recorded) == (21, 21)
    assert result.outcomes == {"error-end:UnknownActor": 17, "error-end:InvalidOutput": 4}


async def test_a_burst_of_unroutable_and_routable_outputs_is_split_exactly(feeder):
    # Concurrent publishes on one channel: the broker's return of an unroutable one must be
    # matched to its own publish, never to a routable one in flight beside it.
    await feeder.start("router", "echo")
    unroutable = [
        valid(f"burst to nowhere {i}", "router", {"to": "nowhere"}, expect=UNKNOWN)
        for i in range(40)
    ]
    routable = [valid(f"burst to echo {i}", "router", {"to": "echo"}) for i in range(40)]

    result = await feeder.feed("router", [*unroutable, *routable])

    assert result.problems == []
    assert (result.tried, result.recorded) == (80, 80)
    assert result.outcomes == {"error-end:UnknownActor": 40, "happy-end": 40}
