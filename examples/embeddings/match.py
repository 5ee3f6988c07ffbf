"""`match` and `review`: name each message's topic, and send the ones that match none to a person.

`match` compares a message's embedding with the corpus' reference messages: its similarity to
a topic is the mean cosine of its three nearest messages of that topic, scaled by `coverage`
(the share of its words the model knows, so that one known word in an otherwise unknown
message does not make a confident match). Below `THRESHOLD` it rewrites the route, inserting
`review` before whatever comes next: a batch actor cannot route one item of its batch, so the
per-item decision is made here, one envelope at a time.
"""

from __future__ import annotations

import numpy as np

from asya import Context, actor

from .lsa import references

THRESHOLD = 0.4
"""Similarity below which a message goes to `review`."""
NEAREST = 3
"""Reference messages per topic that a similarity averages over."""


@actor
class Match:
    """Add `topic` and `similarity`; route a message that matches no topic to `review`."""

    def __init__(self) -> None:
        labels, self.vectors = references()
        self.topics = {
            topic: np.array([label == topic for label in labels]) for topic in sorted(set(labels))
        }

    def similarities(self, embedding: list[float], coverage: float) -> dict[str, float]:
        """{topic: similarity} for one embedded message, best first."""
        cosines = self.vectors @ np.asarray(embedding)
        by_topic = {
            topic: round(float(np.sort(cosines[rows])[-NEAREST:].mean()) * coverage, 3)
            for topic, rows in self.topics.items()
        }
        return dict(sorted(by_topic.items(), key=lambda item: -item[1]))

    def __call__(self, doc: dict, ctx: Context) -> dict:
        topic, similarity = next(iter(self.similarities(doc["embedding"], doc["coverage"]).items()))
        if similarity < THRESHOLD:
            ctx.route.next.insert(0, "review")
        return {**doc, "topic": topic, "similarity": similarity}


@actor
def review(doc: dict) -> dict:
    """Stands for a human review queue: marks the message for a person, with the best guess."""
    return {
        **doc,
        "needs_review": True,
        "reason": f"closest topic {doc['topic']!r} at {doc['similarity']} < {THRESHOLD}",
    }
