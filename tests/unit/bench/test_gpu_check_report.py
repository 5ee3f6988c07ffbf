"""The GPU check's report: shares against both loops, targets judged at batch 32 only, and the
completions read from `asya dev`'s final envelopes. None of it needs torch or a GPU."""

from __future__ import annotations

import json
from pathlib import Path

from bench.gpu_check import BatchResult, _completions, format_table


def result(batch: int, *, plain: float, per_call: float, asya: float, busy: float) -> BatchResult:
    return BatchResult(
        batch,
        plain={
            "items_per_s": plain,
            "gpu_busy_percent": 94.0,
            "per_call": {"items_per_s": per_call, "gpu_busy_percent": 80.0},
        },
        asya={"items_per_s": asya, "gpu_busy_percent": busy, "first_result_s": 4.25},
    )


def test_asya_is_compared_with_the_plain_loop_and_with_the_per_call_loop() -> None:
    run = result(1, plain=5000.0, per_call=2500.0, asya=2000.0, busy=37.0)

    assert run.share == 0.4
    assert run.per_call_share == 0.8


def test_a_missing_figure_gives_no_share_rather_than_a_wrong_one() -> None:
    run = BatchResult(1, plain={"items_per_s": 5000.0}, asya={"items_per_s": None})

    assert run.share is None
    assert run.per_call_share is None


def test_targets_are_judged_at_batch_32_against_the_plain_loop() -> None:
    met = result(32, plain=5700.0, per_call=5600.0, asya=5300.0, busy=88.0)
    missed = result(32, plain=5700.0, per_call=3600.0, asya=3500.0, busy=54.0)

    assert met.targets(judged=True) == {
        "share": {"target": 0.9, "met": True},
        "gpu_busy_percent": {"target": 85.0, "met": True},
    }
    assert {k: v["met"] for k, v in missed.targets(judged=True).items()} == {
        "share": False,
        "gpu_busy_percent": False,
    }
    assert result(1, plain=1, per_call=1, asya=1, busy=1).targets(judged=True) == {}
    assert met.targets(judged=False) == {}


def test_the_table_shows_both_shares_and_the_verdicts() -> None:
    lines = format_table(
        [
            result(32, plain=5699.0, per_call=5600.0, asya=5332.0, busy=88.0),
            result(1, plain=5058.0, per_call=2500.0, asya=1995.0, busy=37.0),
        ],
        judged=True,
    ).splitlines()

    assert "per-call items/s" in lines[0]
    assert "asya/per-call" in lines[0]
    batch_32 = lines[2].split()
    assert batch_32[:4] == ["32", "5,699", "5,600", "5,332"]
    assert "0.94 (≥ 0.90: met)" in lines[2]
    assert "88% (≥ 85%: met)" in lines[2]
    assert "0.95" in batch_32  # asya / per-call
    batch_1 = lines[3].split()
    assert batch_1[:6] == ["1", "5,058", "2,500", "1,995", "0.39", "0.80"]
    assert "met" not in lines[3]


def test_completions_count_the_failed_envelopes_and_time_the_others(tmp_path: Path) -> None:
    finals = tmp_path / "finals.jsonl"
    statuses = [
        {"phase": "succeeded", "updated_at": "2026-11-26T10:00:00.500000+00:00"},
        {"phase": "failed", "updated_at": "2026-11-26T10:00:01+00:00"},
        {"phase": "succeeded", "updated_at": "2026-11-26T10:00:02+00:00"},
    ]
    finals.write_text("".join(json.dumps({"status": s}) + "\n" for s in statuses))

    completions, failed = _completions(finals)

    assert failed == 1
    assert [b - completions[0] for b in completions] == [0.0, 1.5]
