"""Nothing the project ships is said to be missing: the docs, the charts' comments, the examples
and the CRDs' descriptions are read for a shipped feature next to words that deny it ("not
enforced", "not yet", "does not act on").

The features are the ones built and tested (README's status); a feature that is still missing
is not on the list, and may be said to be so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SHIPPED = (
    "quota",
    "quotas",
    "pool",
    "pools",
    "cohort",
    "cohorts",
    "gang",
    "gangs",
    "ActorGroup",
    "ActorGroups",
    "admission",
    "preemption",
    "priority",
    "borrowing",
    "flavor",
    "flavors",
)
"""What the operator enforces today (docs/admission.md): a sentence must not deny these."""

DENIAL = re.compile(
    r"not (yet )?(enforced|acted on|run by|applied by the operator)|does not act on|"
    r"no controller (acts|writes)|(is|are) not (yet )?(implemented|built|supported)",
    re.IGNORECASE,
)

SOURCES = (
    "README.md",
    "docs/*.md",
    "charts/*/values.yaml",
    "charts/*/templates/*",
    "charts/asya-operator/crds/*.yaml",
    "examples/**/*.yaml",
    "examples/**/*.md",
)


def _sentences(text: str) -> list[str]:
    # What a reader reads as one claim: a table row, or a sentence of a paragraph (comment
    # markers and line breaks out).
    units: list[str] = []
    paragraph: list[str] = []
    for line in [*text.splitlines(), ""]:
        bare = re.sub(r"^\s*#\s?", "", line).strip()
        if bare.startswith("|") or not bare:
            units += re.split(r"(?<=[.!?])\s+", " ".join(paragraph))
            paragraph = []
            units.append(bare)
        else:
            paragraph.append(bare)
    return [unit for unit in units if unit]


def _files() -> list[Path]:
    return sorted({p for pattern in SOURCES for p in ROOT.glob(pattern) if p.is_file()})


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_says_a_shipped_feature_is_missing(path):
    stale = [
        sentence
        for sentence in _sentences(path.read_text(encoding="utf-8"))
        if DENIAL.search(sentence)
        and any(re.search(rf"\b{re.escape(f)}\b", sentence) for f in SHIPPED)
    ]
    assert not stale, f"{path.relative_to(ROOT)} says a shipped feature is missing: {stale}"


def test_the_check_finds_a_stale_claim():
    text = "# Quotas are not enforced yet: the operator\n# only shows them."
    assert any(DENIAL.search(s) for s in _sentences(text))
