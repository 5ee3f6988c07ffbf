"""Quickstart: a small text-analytics pipeline built from asya actors.

normalize -> detect-language -> score, with two runtime detours:
- long documents are routed through `split` (a generator: one envelope per chunk);
- low-confidence sentiment is routed to `review` for a second, sentence-level look.

Run it: asya dev examples/quickstart --input examples/quickstart/inputs.jsonl
"""

ROUTE = ["normalize", "detect-language", "score"]
