"""Embeddings: support messages embedded in batches, matched to topics, the unsure ones reviewed.

embed (batch of 16, a GPU when there is one) -> match -> (happy-end), with `review` inserted
by `match` for a message that matches no topic well.

Run it: asya dev examples/embeddings --input examples/embeddings/inputs.jsonl
"""

ROUTE = ["embed", "match"]
