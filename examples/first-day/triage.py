"""Helpdesk triage as an asya pipeline: clean → embed (batched) → classify, unsure tickets to
human-review.

The same steps as the script it replaces (docs/guide-data-scientist.md), with the loops taken
out: asya batches the tickets for `embed` and `classify`, retries the classifier service's
dropped requests by `classify`'s retry policy, and sends each ticket the classifier is unsure
of on to `human-review` by that ticket's own route. The model code is `triage_model`'s,
unchanged.
"""

from __future__ import annotations

import numpy as np
from triage_model import ClassifierService, Embedder, clean_text, train_classifier

from asya import Context, PermanentError, RetryPolicy, actor

ROUTE = ["clean", "embed", "classify"]
THRESHOLD = 0.6
"""Below this confidence a ticket goes to a person."""


@actor
def clean(ticket: dict) -> dict:
    """A raw ticket in, its id and one line of text out; a ticket with no text fails at once."""
    text = clean_text(ticket)
    if not text:
        raise PermanentError(f"ticket {ticket.get('ticket')} has no subject and no body")
    return {"ticket": ticket["ticket"], "text": text}


@actor(batch=16, batch_wait_ms=20, gpus=1)
class Embed:
    """Up to 16 tickets at once; `embedding` added to each."""

    def __init__(self) -> None:
        self.embedder = Embedder()
        print(f"embed: model ready, {self.embedder.dimensions} dimensions")

    def __call__(self, docs: list[dict]) -> list[dict]:
        vectors = self.embedder.embed([doc["text"] for doc in docs])
        # .tolist() makes numpy floats Python floats: a numpy value is not JSON.
        return [
            {**doc, "embedding": [round(x, 5) for x in vector.tolist()]}
            for doc, vector in zip(docs, vectors, strict=True)
        ]


@actor(
    batch=16,
    batch_wait_ms=20,
    retry=RetryPolicy(max_attempts=3, base_delay_ms=100, retry_on=ConnectionError),
    max_replicas=2,  # the service takes two clients: a ticket outlasts both cold connections
)
class Classify:
    """Up to 16 tickets at once, each labelled; each unsure one routed to human-review."""

    def __init__(self) -> None:
        self.service = ClassifierService(train_classifier())

    def __call__(self, docs: list[dict], ctxs: list[Context]) -> list[dict]:
        # A dropped request raises ConnectionError: the whole batch is retried (retry_on).
        predictions = self.service.predict(np.array([doc["embedding"] for doc in docs]))
        results = []
        for doc, ctx, (label, confidence) in zip(docs, ctxs, predictions, strict=True):
            if confidence < THRESHOLD:
                ctx.route.next = ["human-review", *ctx.route.next]  # this ticket alone
            results.append(
                {
                    "ticket": doc["ticket"],
                    "label": label,
                    "confidence": round(float(confidence), 3),
                    "needs_review": False,
                }
            )
        return results


@actor
def human_review(doc: dict) -> dict:
    """Stands for the queue a person works from: the ticket is marked for a person."""
    return {**doc, "needs_review": True}
