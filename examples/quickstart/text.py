"""Text actors: `normalize` cleans a document, `split` fans a long one out into chunks."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from asya import Context, PermanentError, actor

LONG_DOC_WORDS = 100
"""Documents longer than this are split before language detection and scoring."""

CHUNK_WORDS = 60
"""Target size of a chunk; chunks end at sentence boundaries."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@actor(concurrency=4)
def normalize(doc: dict, ctx: Context) -> dict:
    """Unicode-normalize and collapse whitespace; route long documents through `split`."""
    if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
        got = type(doc.get("text")).__name__ if isinstance(doc, dict) else type(doc).__name__
        raise PermanentError(f"payload must be an object with a 'text' string, got {got}")
    text = " ".join(unicodedata.normalize("NFKC", doc["text"]).split())
    if not text:
        raise PermanentError("'text' is empty after normalization")
    words = len(text.split())
    if words > LONG_DOC_WORDS:
        ctx.route.next.insert(0, "split")
    return {**doc, "text": text, "words": words}


def sentences(text: str) -> list[str]:
    """Sentences of `text`, split after ., ! or ? followed by whitespace."""
    return [s for s in _SENTENCE_END.split(text) if s]


@actor
def split(doc: dict, ctx: Context) -> Iterator[dict]:
    """One chunk per ~CHUNK_WORDS words, on sentence boundaries; each goes on alone."""
    chunks: list[list[str]] = [[]]
    size = 0
    for sentence in sentences(doc["text"]):
        n = len(sentence.split())
        if size and size + n > CHUNK_WORDS:
            chunks.append([])
            size = 0
        chunks[-1].append(sentence)
        size += n
    for index, chunk in enumerate(chunks, start=1):
        text = " ".join(chunk)
        yield {
            **doc,
            "text": text,
            "words": len(text.split()),
            "source_id": ctx.id,
            "chunk": index,
            "chunks": len(chunks),
        }
