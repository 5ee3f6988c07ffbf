"""A small, real embedding model: latent semantic analysis (LSA), fitted at start.

TF-IDF weights each word of a message by how rare it is across the corpus; a truncated SVD of
the corpus' TF-IDF matrix finds the few directions along which words co-occur (the "topics"
of the corpus), and an embedding is a message's TF-IDF vector projected onto them, scaled to
unit length. Messages about the same thing land close together even when they share few
words, and a message with no word the corpus knows gets the zero vector.

The corpus (`corpus.tsv`) ships with the example, so nothing is downloaded: fitting takes a few
milliseconds and is deterministic (each direction's sign is fixed, as scikit-learn's
`svd_flip` does). numpy only; the projection runs on a GPU through PyTorch where both are
present (`Embed` in `embed.py` picks).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

CORPUS = Path(__file__).with_name("corpus.tsv")
DIMENSIONS = 16
"""Length of an embedding: the directions kept from the SVD."""

Matrix = npt.NDArray[np.float64]

_WORD = re.compile(r"[a-z]+")
STOP_WORDS = frozenset(
    line.strip()
    for line in Path(__file__).with_name("stopwords.txt").read_text(encoding="utf-8").splitlines()
    if line.strip() and not line.startswith("#")
)
"""Words too common to tell topics apart (`stopwords.txt`)."""


def tokenize(text: str) -> list[str]:
    """Lower-case words without stop words, plural `s` cut (`parcels` is `parcel`)."""
    words = [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS and len(w) > 1]
    return [w[:-1] if w.endswith("s") and not w.endswith("ss") and len(w) > 3 else w for w in words]


def read_corpus(path: Path = CORPUS) -> list[tuple[str, str]]:
    """(topic, text) pairs from a TSV file; `#` lines are comments."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            topic, text = line.split("\t", 1)
            rows.append((topic, text))
    return rows


@dataclass(frozen=True)
class Lsa:
    """A fitted model: vocabulary, inverse document frequencies and the kept directions."""

    vocabulary: dict[str, int]
    idf: Matrix
    components: Matrix
    """(dimensions, vocabulary) rows: the directions an embedding is measured along."""

    @classmethod
    def fit(cls, texts: Sequence[str], dimensions: int = DIMENSIONS) -> Lsa:
        """Fit on `texts`: every word they use makes the vocabulary."""
        documents = [set(tokenize(text)) for text in texts]
        frequency = Counter(word for words in documents for word in words)
        kept = sorted(frequency)
        vocabulary = {word: i for i, word in enumerate(kept)}
        # Smoothed IDF, as scikit-learn's TfidfVectorizer: a word in every text still counts.
        n = len(texts)
        idf = np.array([math.log((1 + n) / (1 + frequency[w])) + 1 for w in kept])
        model = cls(vocabulary, idf, np.empty((0, len(kept))))
        _, _, vt = np.linalg.svd(model.tfidf(texts), full_matrices=False)
        components = vt[:dimensions]
        # An SVD direction and its negation are equally valid: fix the sign so that each
        # direction's largest weight is positive, and every fit gives the same embeddings.
        signs = np.sign(components[np.arange(len(components)), np.abs(components).argmax(axis=1)])
        return cls(vocabulary, idf, components * signs[:, None])

    def tfidf(self, texts: Sequence[str]) -> Matrix:
        """(texts, vocabulary) TF-IDF rows of unit length (sublinear term frequency)."""
        rows = np.zeros((len(texts), len(self.vocabulary)))
        for i, text in enumerate(texts):
            for word, count in Counter(tokenize(text)).items():
                column = self.vocabulary.get(word)
                if column is not None:
                    rows[i, column] = (1 + math.log(count)) * self.idf[column]
        return normalize(rows)

    def embed(self, texts: Sequence[str]) -> Matrix:
        """(texts, dimensions) unit-length embeddings, on CPU."""
        return normalize(self.tfidf(texts) @ self.components.T)

    def coverage(self, text: str) -> float:
        """The share of the text's words the model knows (0 for a text with no word at all)."""
        words = tokenize(text)
        return sum(w in self.vocabulary for w in words) / len(words) if words else 0.0


def normalize(rows: Matrix) -> Matrix:
    """Each row scaled to unit length; a zero row stays zero."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


@functools.cache
def model() -> Lsa:
    """The model fitted on the shipped corpus, once per process."""
    return Lsa.fit([text for _, text in read_corpus()])


@functools.cache
def references() -> tuple[tuple[str, ...], Matrix]:
    """The corpus' topics, one per message, and the messages' embeddings: what a new message
    is compared with."""
    rows = read_corpus()
    return tuple(topic for topic, _ in rows), model().embed([text for _, text in rows])
