"""`python -m bench` end to end at a tiny size on the real broker: what it sends, it counts.

Never on timings: only that every message sent arrived exactly once, that every process
stopped cleanly, and that the results have the shape readers and tools rely on.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

ARGS = (
    "--contenders", "asya-serve,raw-aio-pika", "--queue-types", "quorum",
    "--count", "30", "--warmup", "5", "--rates", "100", "--light-count", "10",
    "--batch-sizes", "1,4", "--batch-rounds", "2", "--batch-fixed-ms", "1",
    "--batch-item-ms", "0.1", "--timeout", "30", "--rounds", "2",
)  # fmt: skip

EXACTLY_ONCE = {"failed": 0, "missing": 0, "duplicates": 0, "unreadable": 0}


async def run_bench(
    amqp_url: str, output: Path, args: tuple[str, ...] = ARGS
) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench",
        "--broker",
        amqp_url,
        "--output",
        str(output),
        *args,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(120):
        stdout, stderr = await process.communicate()
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


async def test_every_message_arrives_exactly_once_and_the_results_have_their_shape(
    amqp_url, tmp_path
):
    output = tmp_path / "results.json"

    code, table, progress = await run_bench(amqp_url, output)

    assert code == 0, progress
    results = json.loads(output.read_text())
    order = [(r["queue_type"], r["contender"], r["round"]) for r in results["runs"]]
    # The second round starts one contender later.
    assert order == [
        ("quorum", "asya-serve", 0),
        ("quorum", "raw-aio-pika", 0),
        ("quorum", "raw-aio-pika", 1),
        ("quorum", "asya-serve", 1),
    ]
    runs = {(r["queue_type"], r["contender"]): r for r in results["runs"] if r["round"] == 0}
    assert len(results["ratio_rounds"]["quorum"]["asya-serve / raw-aio-pika"]) == 2
    assert results["settings"]["rounds"] == 2
    for run in runs.values():
        assert run["delivery"] == {"sent": 45, "arrived": 45, **EXACTLY_ONCE}, run
        assert run["stopped_by_sigkill"] == []
        assert run["saturation"]["messages"] == 30
        assert set(run["saturation"]) == {"messages", "seconds", "per_s"}
        assert [(r["rate_per_s"], r["messages"]) for r in run["light"]] == [(100.0, 10)]
        assert set(run["light"][0]) == {"rate_per_s", "messages", "p50_ms", "p99_ms", "max_ms"}
    assert "serve" in runs["quorum", "asya-serve"]["cpu_s"]
    assert "bench" in runs["quorum", "raw-aio-pika"]["cpu_s"]
    assert set(runs["quorum", "raw-aio-pika"]["peak_rss_mib"]) == {"hop"}
    assert list(results["ratios"]["quorum"]) == ["asya-serve / raw-aio-pika"]
    sizes = results["batching"]["quorum"]["sizes"]
    assert [(s["batch"], s["delivery"]["sent"], s["delivery"]["arrived"]) for s in sizes] == [
        (1, 3, 3),
        (4, 12, 12),
    ]
    assert isinstance(results["batching"]["quorum"]["ratio_largest_to_smallest"], float)
    assert results["machine"]["cpus"] == os.cpu_count()
    assert results["versions"]["aio-pika"] is not None
    assert "asya-serve / raw-aio-pika" in table
    assert "median of 2 rounds" in table
    assert "asya-serve #2" in table
    assert "quorum asya-serve: starting" in progress


async def test_the_split_raw_hop_passes_every_message_once_through_both_of_its_processes(
    amqp_url, tmp_path
):
    output = tmp_path / "results.json"
    args = (
        "--contenders", "raw-split", "--queue-types", "quorum", "--count", "30",
        "--warmup", "5", "--rates", "", "--batch-sizes", "", "--utilisation", "",
        "--timeout", "30",
    )  # fmt: skip

    code, _, progress = await run_bench(amqp_url, output, args)

    assert code == 0, progress
    [run] = json.loads(output.read_text())["runs"]
    assert run["delivery"] == {"sent": 35, "arrived": 35, **EXACTLY_ONCE}, run
    assert run["stopped_by_sigkill"] == []
    # Each hop's consumer and its handler process are measured apart.
    assert set(run["peak_rss_mib"]) == {"hop", "handler"}
    assert set(run["cpu_s"]) >= {"hop", "handler"}
