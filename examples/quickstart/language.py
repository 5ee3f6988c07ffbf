"""`detect-language`: stop-word profile matching, enough to tell these languages apart."""

from __future__ import annotations

import re

from asya import actor

STOPWORDS = {
    "en": "the and is are was were a an of to in it this that for with not but very have has"
    " i you he she they we my our your be been on at by from or as so too just than",
    "es": "el la los las y es son fue era un una de del en que por para con no pero muy"
    " lo se su sus mi al como más ya este esta esto fueron",
    "fr": "le la les et est sont était un une des du de en que pour avec ne pas mais très"
    " je tu il elle nous vous ce cette qui au aux sur",
    "de": "der die das und ist sind war ein eine einen nicht aber sehr ich du er sie wir"
    " mit für auf zu den dem des im auch noch",
}

_WORD = re.compile(r"[^\W\d_]+")


@actor(concurrency=4)
class DetectLanguage:
    """Picks the language whose stop words cover most of the text."""

    def __init__(self) -> None:
        self.profiles = {lang: frozenset(words.split()) for lang, words in STOPWORDS.items()}

    def __call__(self, doc: dict) -> dict:
        tokens = [t.lower() for t in _WORD.findall(doc["text"])]
        hits = {lang: sum(t in words for t in tokens) for lang, words in self.profiles.items()}
        best = max(hits, key=lambda lang: hits[lang])
        total = sum(hits.values())
        if total == 0:
            return {**doc, "lang": "unknown", "lang_confidence": 0.0}
        return {**doc, "lang": best, "lang_confidence": round(hits[best] / total, 3)}
