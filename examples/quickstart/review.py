"""`review`: a second look at documents the scorer was not sure about.

Looks clause by clause (sentences, split again at 'but', 'however'...): a document with clearly
positive and clearly negative clauses is
`mixed`; one with no sentiment words at all (or in a language without a lexicon) is left for a
person (`needs_human`). It stands where a call to a slower, better model or a human review
queue would go: `review_delay_s` in the payload is how long that external service takes, and
the actor's timeout bounds it.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from asya import RetryPolicy, actor

from .sentiment import load_lexicon, polarity, tokenize
from .text import sentences

_CONTRAST = re.compile(r",?\s+(?:but|however|although|though|pero|aunque|mais|aber)\s+", re.I)
_LEXICON = load_lexicon(Path(__file__).with_name("lexicon.tsv"))


@actor(timeout_s=2, retry=RetryPolicy(max_attempts=2, base_delay_ms=200))
async def review(doc: dict) -> dict:
    """Sentence-level second opinion; see the module docstring."""
    await asyncio.sleep(float(doc.get("review_delay_s", 0)))
    words = _LEXICON.get(doc.get("lang", ""), {})
    clauses = [c for s in sentences(doc["text"]) for c in _CONTRAST.split(s) if c]
    scores = [polarity(tokenize(c), words, doc.get("lang", ""))[0] for c in clauses]
    positive = sum(s >= 0.3 for s in scores)
    negative = sum(s <= -0.3 for s in scores)
    if not words or not (positive or negative):
        verdict = "needs_human"
    elif positive and negative:
        verdict = "mixed"
    else:
        verdict = "positive" if positive else "negative"
    return {**doc, "review": verdict, "reviewed_clauses": len(clauses)}
