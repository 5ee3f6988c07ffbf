"""What a broker credential reaches beyond its namespace, in words (`asya status`'s note)."""

from __future__ import annotations

import pytest

from asya import broker_identity
from asya.broker_identity import namespace_of_queue, reach_notes


@pytest.mark.parametrize(
    ("queue", "namespace"),
    [
        ("asya.ml-b.embed", "ml-b"),
        ("asya.ml-b.embed.retry-100ms", "ml-b"),
        ("asya-ml-b.parking", "ml-b"),
        ("asya-ml-b.results", "ml-b"),
        ("asya-ml-b.reply.0123456789abcdef0123456789abcdef", "ml-b"),
        ("asya-ml-b-embed", None),  # an old name: ml's actor b-embed, or ml-b's embed
        ("amq.gen-Xyz", None),
        ("orders", None),
        ("asya.", None),
        ("asya..x", None),
    ],
)
def test_a_queue_belongs_to_the_namespace_its_name_says(queue, namespace):
    assert namespace_of_queue(queue) == namespace


def test_a_namespace_alone_on_its_vhost_gets_no_note_whatever_its_tags():
    queues = ["asya.ml-b.embed", "asya-ml-b.results", "orders"]

    notes = reach_notes("ml-b", "asya.ml-b", queues, ["asya.ml-b"], ["administrator"], "guest")

    assert notes == []


def test_other_namespaces_queues_in_the_vhost_are_named():
    queues = ["asya.ml-b.embed", "asya.ml-a.embed", "asya-ml-c.results", "asya-ml-a-old"]

    [note] = reach_notes("ml-b", "/", queues, ["/"], ["management"], "shared")

    assert note.startswith("broker user shared reaches more than namespace ml-b needs:")
    assert "vhost / also holds the queues of namespace(s) ml-a, ml-c" in note
    assert broker_identity.GUIDE in note
    assert "tagged" not in note


def test_other_vhosts_and_wide_tags_are_named():
    [note] = reach_notes(
        "ml-b",
        "asya.ml-b",
        ["asya.ml-b.embed"],
        ["asya.ml-a", "asya.ml-b", "/"],
        ["administrator", "management"],
        "guest",
    )

    assert "it may open vhost(s) /, asya.ml-a besides asya.ml-b" in note
    assert "it is tagged administrator" in note
    assert "holds the queues" not in note


def test_what_could_not_be_read_is_not_guessed():
    assert reach_notes("ml-b", "asya.ml-b", ["asya.ml-b.x"], None, None, None) == []

    [note] = reach_notes("ml-b", "/", ["asya.ml-a.x"], None, None, None)

    assert note.startswith("the broker credential reaches more than namespace ml-b needs")


def test_a_long_list_names_five_and_counts_the_rest():
    queues = [f"asya.ns{n}.a" for n in range(8)]

    [note] = reach_notes("ns0", "/", queues, None, None, None)

    assert "namespace(s) ns1, ns2, ns3, ns4, ns5 and 2 more, so" in note
