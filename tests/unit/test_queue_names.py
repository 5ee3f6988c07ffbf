"""Queue names: no two (namespace, actor) pairs share one, and each reads back as its own."""

from __future__ import annotations

import itertools

import pytest

from asya.queue_names import (
    delay_queue_name,
    legacy_queue_name,
    legacy_readings,
    queue_name,
)
from asya.status import actor_of_queue
from asya.transport.base import parking_queue_name, reply_queue_name
from asya.transport.records import RecordKind, records_stream_name

# Every DNS-1123 label of up to three characters from an alphabet with a '-' in it.
_ALPHABET = "ab-"
LABELS = sorted(
    name
    for size in (1, 2, 3)
    for name in map("".join, itertools.product(_ALPHABET, repeat=size))
    if not name.startswith("-") and not name.endswith("-")
)
PAIRS = list(itertools.product(LABELS, LABELS))


def test_the_pairs_that_once_shared_a_queue_have_queues_of_their_own():
    # `ml`'s actor `a-embed` and `ml-a`'s actor `embed`: once both asya-ml-a-embed.
    assert legacy_queue_name("ml", "a-embed") == legacy_queue_name("ml-a", "embed")

    assert queue_name("ml", "a-embed") == "asya.ml.a-embed"
    assert queue_name("ml-a", "embed") == "asya.ml-a.embed"


def test_no_two_namespace_actor_pairs_share_any_name():
    # Given: every pair's queue and delay queues, and every namespace's own names
    names: dict[str, tuple[str, ...]] = {}
    owners: list[tuple[str, tuple[str, ...]]] = []
    for namespace, actor in PAIRS:
        owners.append((queue_name(namespace, actor), (namespace, actor)))
        owners.append((delay_queue_name(namespace, actor, 100), (namespace, actor, "delay")))
    for namespace in LABELS:
        owners.append((parking_queue_name(namespace), (namespace, "parking")))
        owners.append((reply_queue_name(namespace, "0" * 32), (namespace, "reply")))
        for kind in RecordKind:
            owners.append((records_stream_name(namespace, kind), (namespace, kind.value)))

    # Then: each name has one owner
    for name, owner in owners:
        assert names.setdefault(name, owner) == owner, f"{name}: {names[name]} and {owner}"


def test_the_old_names_were_shared_which_is_what_the_new_ones_fix():
    legacy = [legacy_queue_name(namespace, actor) for namespace, actor in PAIRS]

    assert len(set(legacy)) < len(legacy)


@pytest.mark.parametrize(("namespace", "actor"), PAIRS[::7])
def test_each_queue_reads_back_as_its_own_namespace_and_actor_only(namespace, actor):
    own, delay = queue_name(namespace, actor), delay_queue_name(namespace, actor, 60_000)

    assert actor_of_queue(namespace, own) == (actor, False)
    assert actor_of_queue(namespace, delay) == (actor, True)
    for other in LABELS:
        if other != namespace:
            assert actor_of_queue(other, own) is None
            assert actor_of_queue(other, delay) is None


@pytest.mark.parametrize(
    "queue",
    ["asya-ml.parking", "asya-ml.results", "asya-ml.reply." + "0" * 32, "asya.ml.x.other"],
)
def test_the_namespaces_other_names_are_no_actors_queues(queue):
    assert actor_of_queue("ml", queue) is None


@pytest.mark.parametrize(
    ("queue", "expected"),
    [
        pytest.param("asya-ml-x", [], id="no-dash-in-the-actor"),
        pytest.param("asya-ml-a-x", ["ml-a"], id="ml-a"),
        pytest.param("asya-ml-a-x-retry-10ms", ["ml-a", "ml-a-x", "ml-a-x-retry"], id="delay"),
        pytest.param("asya-mlx-a", [], id="not-of-ml"),
    ],
)
def test_an_old_name_also_reads_as_any_longer_namespace_it_begins_with(queue, expected):
    assert legacy_readings("ml", queue) == expected
