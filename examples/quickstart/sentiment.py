"""`score`: lexicon-based sentiment with negation and intensifiers (in the spirit of VADER).

The lexicon (`lexicon.tsv`: language, word, valence from -3 to +3) is loaded once per worker.
Scores below CONFIDENT are routed to `review` by rewriting the route at runtime.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from asya import Context, actor

CONFIDENT = 0.35
"""Confidence below which a document goes to `review`."""

NEGATIONS = {
    "en": {
        "not",
        "no",
        "never",
        "none",
        "nothing",
        "hardly",
        "isn't",
        "wasn't",
        "don't",
        "doesn't",
        "didn't",
        "can't",
        "won't",
        "couldn't",
        "shouldn't",
        "aren't",
    },
    "es": {"no", "nunca", "nada", "jamás", "tampoco", "ningún", "ninguna"},
}
INTENSIFIERS = {
    "en": {
        "very": 1.5,
        "really": 1.4,
        "extremely": 1.8,
        "so": 1.3,
        "incredibly": 1.7,
        "absolutely": 1.6,
        "totally": 1.4,
        "slightly": 0.6,
        "somewhat": 0.7,
    },
    "es": {
        "muy": 1.5,
        "realmente": 1.4,
        "extremadamente": 1.8,
        "tan": 1.3,
        "bastante": 1.2,
        "algo": 0.7,
        "un poco": 0.6,
    },
}
NEGATION_WINDOW = 3
"""A negation flips the words up to this many tokens after it."""

_TOKEN = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?|[.,;:!?]")
_CLAUSE_END = frozenset(".,;:!?")


def tokenize(text: str) -> list[str]:
    """Lowercase words, with punctuation kept as tokens (it ends a negation's reach)."""
    return [t.lower() for t in _TOKEN.findall(text)]


def load_lexicon(path: Path) -> dict[str, dict[str, float]]:
    """{language: {word: valence}} from a TSV of language, word, valence."""
    lexicon: dict[str, dict[str, float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            lang, word, valence = line.split("\t")
            lexicon.setdefault(lang, {})[word] = float(valence)
    return lexicon


def polarity(tokens: list[str], words: dict[str, float], lang: str) -> tuple[float, int]:
    """(compound score in -1..1, number of sentiment words found)."""
    total, hits, negate_left, boost = 0.0, 0, 0, 1.0
    for token in tokens:
        if token in _CLAUSE_END:
            negate_left, boost = 0, 1.0
            continue
        if token in NEGATIONS.get(lang, ()):
            negate_left = NEGATION_WINDOW
            continue
        if token in INTENSIFIERS.get(lang, {}):
            boost = INTENSIFIERS[lang][token]
            continue
        if token in words:
            value = words[token] * boost
            total += -0.75 * value if negate_left else value
            hits += 1
        boost = 1.0
        negate_left = max(0, negate_left - 1)
    return total / math.sqrt(total * total + 15), hits


@actor(concurrency=4)
class Score:
    """Label a document positive, negative or neutral, with a confidence."""

    def __init__(self) -> None:
        self.lexicon = load_lexicon(Path(__file__).with_name("lexicon.tsv"))

    def __call__(self, doc: dict, ctx: Context) -> dict:
        lang = doc.get("lang", "unknown")
        words = self.lexicon.get(lang, {})
        compound, hits = polarity(tokenize(doc["text"]), words, lang)
        label = "positive" if compound >= 0.05 else "negative" if compound <= -0.05 else "neutral"
        coverage = min(1.0, hits / 2)
        confidence = round(abs(compound) * coverage, 3) if words else 0.0
        if confidence < CONFIDENT:
            ctx.route.next.insert(0, "review")
        return {**doc, "sentiment": label, "score": round(compound, 3), "confidence": confidence}
