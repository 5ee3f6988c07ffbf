"""The summary `asya dev` ends with says what each column counts: envelopes apart from attempts."""

from __future__ import annotations

import re
from pathlib import Path

from asya import RetryPolicy, actor
from asya.local.report import SUMMARY_COLUMNS, format_summary
from tests.unit.metrics.run import run_mesh

ROOT = Path(__file__).resolve().parents[3]


async def test_five_envelopes_two_of_them_retried_once_are_five_envelopes_and_seven_attempts():
    failed_once: set[int] = set()

    @actor(retry=RetryPolicy(max_attempts=3, base_delay_ms=1, jitter=0))
    def flaky(doc):
        if doc["n"] in (1, 3) and doc["n"] not in failed_once:
            failed_once.add(doc["n"])
            raise ConnectionError("flaky")
        return doc

    stats = await run_mesh([{"n": n} for n in range(5)], ["flaky"])

    header, _, row, *_ = format_summary(stats, ["flaky"], 1.0).splitlines()
    columns = re.split(r"\s{2,}", header)
    assert columns[:5] == ["actor", "envelopes", "attempts", "retried", "failed"]
    assert row.split()[:5] == ["flaky", "5", "7", "2", "0"]


def _sample_headers() -> list[list[str]]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
    return [
        re.split(r"\s{2,}", line.strip())
        for page in pages
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith("actor ") and line.rstrip().endswith("peak workers")
    ]


def test_every_sample_summary_in_the_docs_has_the_columns_asya_dev_prints():
    headers = _sample_headers()

    assert headers, "no sample summary found in README.md or docs/"
    assert all(h == list(SUMMARY_COLUMNS) for h in headers), headers
