"""`python -m bench`: asya against its peers on one broker, in one run, measured the same way.

Reads the options, runs every contender on every queue type, then the batching sizes, then the
device utilisation runs (`bench.utilisation`), writes the results as JSON and prints them as a
table. Progress goes to stderr, one line as each contender starts and finishes. Exit code: 0
when every contender delivered every message exactly once; 1 when one failed or lost,
duplicated or failed a message; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import datetime
import os
import secrets
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aio_pika
from aio_pika.abc import AbstractRobustConnection

from asya import event_loop
from bench import contenders, report
from bench.batching import BatchPlan, measure_batching
from bench.contenders.base import Contender, Setup
from bench.environment import describe
from bench.measure import ContenderFailedError, Plan, measure
from bench.procs import find_broker_pid
from bench.utilisation import PATHS, PIPELINE_DEPTH_VARIABLE, UtilisationPlan, measure_utilisation

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"
QUEUE_TYPES = ("quorum", "classic")


@dataclass(frozen=True)
class Config:
    url: str
    contenders: tuple[str, ...]
    queue_types: tuple[str, ...]
    hops: int
    inflight: int
    rounds: int
    plan: Plan
    batching: BatchPlan | None
    utilisation: UtilisationPlan | None
    output: Path


def _names(text: str, choices: Sequence[str], what: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in choices]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown {what}: {', '.join(unknown) or '(none)'}; choose from {', '.join(choices)}"
        )
    return names


def _names_or_none(text: str, choices: Sequence[str], what: str) -> tuple[str, ...]:
    """As `_names`, but '' (or only commas and blanks) is none at all."""
    if not text.replace(",", "").strip():
        return ()
    return _names(text, choices, what)


def _numbers(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas: {exc}") from exc
    if any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError("every value must be above 0")
    return values


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"expected whole numbers separated by commas: {exc}"
        ) from exc
    if any(v < 1 for v in sizes):
        raise argparse.ArgumentTypeError("every batch size must be 1 or more")
    return sizes


def _positive_ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a number: {exc}") from exc
    if not value > 0:
        raise argparse.ArgumentTypeError("must be above 0")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def default_output() -> Path:
    day = datetime.date.today().isoformat()
    return Path("bench/results") / f"{day}-{os.cpu_count()}cores.json"


def parser() -> argparse.ArgumentParser:
    contender_lines = "\n".join(f"  {n:14} {d}" for n, d in contenders.DESCRIPTIONS.items())
    p = argparse.ArgumentParser(
        prog="python -m bench",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.fill(
            "Throughput, latency, CPU and memory of asya against its peers, on one broker, in"
            " one run. Every contender gets the same publisher, sink, payload size, in-flight"
            " budget per hop and warm-up; persistent messages and publisher confirms for all."
            " Run it with nothing else on the machine; compare ratios, not absolute figures.",
            width=80,
        )
        + f"\n\ncontenders:\n{contender_lines}\n\n"
        + "Peers that are not installed are skipped, saying so: pip install -e '.[bench]'.",
    )
    p.add_argument(
        "--broker",
        default=os.environ.get("ASYA_TEST_AMQP_URL", DEFAULT_URL),
        metavar="URL",
        help=f"RabbitMQ to run on (default: ASYA_TEST_AMQP_URL or {DEFAULT_URL}); its CPU is"
        " measured when it runs on this machine",
    )
    p.add_argument(
        "--contenders",
        type=lambda t: _names_or_none(t, contenders.NAMES, "contender"),
        default=contenders.NAMES,
        metavar="A,B",
        help=f"which to run, in this order ('' for none: only the batching and utilisation"
        f" runs) (default: {','.join(contenders.NAMES)})",
    )
    p.add_argument(
        "--queue-types",
        type=lambda t: _names(t, QUEUE_TYPES, "queue type"),
        default=QUEUE_TYPES,
        metavar="T,T",
        help="quorum, classic or both (default: quorum,classic); every contender on each",
    )
    p.add_argument(
        "--hops", type=_positive, default=3, metavar="N", help="hops of trivial handlers (3)"
    )
    p.add_argument(
        "--payload-bytes", type=int, default=256, metavar="N", help="padding in each payload (256)"
    )
    p.add_argument(
        "--inflight",
        type=_positive,
        default=16,
        metavar="N",
        help="messages each hop holds and works on at once: prefetch and concurrency (16)",
    )
    p.add_argument(
        "--rounds",
        type=_positive,
        default=1,
        metavar="N",
        help="run every contender N times, in turn, each round starting one contender later"
        " than the last (so none always runs first or last); ratios are per round, and the"
        " median and range over the rounds are reported: this machine's noise between two"
        " runs of one contender is often larger than the difference measured (1)",
    )
    p.add_argument(
        "--count",
        type=_positive,
        default=3000,
        metavar="N",
        help="messages in the saturation batch, all published at once (3000)",
    )
    p.add_argument(
        "--warmup",
        type=_positive,
        default=100,
        metavar="N",
        help="messages sent through every hop and awaited before the clock starts (100)",
    )
    p.add_argument(
        "--rates",
        type=_numbers,
        default=(20.0, 100.0),
        metavar="R,R",
        help="light rates, messages per second, for end-to-end latency p50/p99; keep them"
        " under every contender's saturation (20,100)",
    )
    p.add_argument(
        "--light-count", type=_positive, default=200, metavar="N", help="messages per rate (200)"
    )
    p.add_argument(
        "--batch-sizes",
        type=_sizes,
        default=(1, 8, 32),
        metavar="B,B",
        help="batch sizes of the batching run through the pods ('' to skip) (1,8,32)",
    )
    p.add_argument(
        "--batch-fixed-ms",
        type=float,
        default=50.0,
        metavar="MS",
        help="fixed cost of one call of the batch actor, slept (50)",
    )
    p.add_argument(
        "--batch-item-ms",
        type=float,
        default=0.5,
        metavar="MS",
        help="its cost per item in the batch, slept (0.5)",
    )
    p.add_argument(
        "--batch-wait-ms",
        type=int,
        default=20,
        metavar="MS",
        help="batch_wait_ms of the batch actor: longest wait for a batch to fill (20)",
    )
    p.add_argument(
        "--batch-rounds",
        type=_positive,
        default=30,
        metavar="N",
        help="each batch size's saturation batch is N full batches (30)",
    )
    p.add_argument(
        "--utilisation",
        type=lambda t: _names_or_none(t, PATHS, "utilisation path"),
        default=PATHS,
        metavar="P,P",
        help="device utilisation runs: the share of a device-bound handler's standalone rate"
        " that asya reaches in steady state, on the local runner's GPU-worker path (local:"
        " batch 32 and batch 1, in-memory) and on a pod (pods: batch 32, RabbitMQ, the first"
        " queue type) ('' to skip) (local,pods)",
    )
    p.add_argument(
        "--device-ms",
        type=_positive_ms,
        default=5.0,
        metavar="MS",
        help="device time of one batch of 32 on the local path, slept (5)",
    )
    p.add_argument(
        "--device-call-ms",
        type=_positive_ms,
        default=0.3,
        metavar="MS",
        help="device time of one call at batch 1 on the local path, slept (0.3)",
    )
    p.add_argument(
        "--pods-device-ms",
        type=_positive_ms,
        default=40.0,
        metavar="MS",
        help="device time of one batch of 32 on the pod, slept; the broker on a small machine"
        " cannot carry a faster device (40)",
    )
    p.add_argument(
        "--utilisation-seconds",
        type=_positive_ms,
        default=3.0,
        metavar="S",
        help="device work each utilisation run's queue is filled with, in seconds at the"
        " handler's standalone rate (3)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="longest wait for one phase of one contender before it counts as failed (300)",
    )
    p.add_argument(
        "--output",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"where to write the JSON (default: bench/results/DATE-Ncores.json, here"
        f" {default_output()})",
    )
    return p


def config_from(args: argparse.Namespace) -> Config:
    sizes = args.batch_sizes
    return Config(
        url=args.broker,
        contenders=args.contenders,
        queue_types=args.queue_types,
        hops=args.hops,
        inflight=args.inflight,
        rounds=args.rounds,
        plan=Plan(
            count=args.count,
            warmup=args.warmup,
            rates=args.rates,
            light_count=args.light_count,
            payload_bytes=args.payload_bytes,
            timeout_s=args.timeout,
        ),
        batching=BatchPlan(
            sizes=sizes,
            fixed_ms=args.batch_fixed_ms,
            item_ms=args.batch_item_ms,
            wait_ms=args.batch_wait_ms,
            rounds=args.batch_rounds,
        )
        if sizes
        else None,
        utilisation=UtilisationPlan(
            paths=args.utilisation,
            device_ms=args.device_ms,
            call_ms=args.device_call_ms,
            pods_device_ms=args.pods_device_ms,
            seconds=args.utilisation_seconds,
            queue_type=args.queue_types[0],
            payload_bytes=args.payload_bytes,
            timeout_s=args.timeout,
            pipeline_depth=os.environ.get(PIPELINE_DEPTH_VARIABLE),
        )
        if args.utilisation
        else None,
        output=args.output or default_output(),
    )


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _Runner:
    """Runs contenders one after another on one connection, logs under one folder."""

    def __init__(self, config: Config, connection: AbstractRobustConnection, logs: Path) -> None:
        self._config = config
        self._connection = connection
        self._logs = logs
        self._token = secrets.token_hex(3)
        self._broker_pid = find_broker_pid()
        if self._broker_pid is None:
            say("bench: no RabbitMQ (beam.smp) process on this machine: broker CPU not measured")

    @property
    def broker_pid(self) -> int | None:
        return self._broker_pid

    def setup(self, name: str, queue_type: str, round_: int = 0) -> Setup:
        workdir = self._logs / f"{queue_type}-{name}" / str(round_)
        workdir.mkdir(parents=True)
        return Setup(
            url=self._config.url,
            hops=self._config.hops,
            inflight=self._config.inflight,
            queue_type=queue_type,
            prefix=f"bench-{self._token}-{queue_type[0]}{round_}-{name}",
            workdir=workdir,
        )

    async def one(self, contender: Contender, plan: Plan, queue_type: str) -> dict[str, Any]:
        say(f"bench: {queue_type} {contender.name}: starting")
        head = {"contender": contender.name, "queue_type": queue_type}
        try:
            measured = await measure(contender, plan, self._connection, self._broker_pid)
        except ContenderFailedError as exc:
            say(f"bench: {queue_type} {contender.name}: FAILED: {exc}")
            return {**head, "error": str(exc)}
        say(f"bench: {queue_type} {contender.name}: {report.progress(measured)}")
        return {**head, **measured}

    async def batching(self, plan: BatchPlan, queue_type: str) -> dict[str, Any]:
        return await measure_batching(
            plan,
            lambda name: self.setup(name, queue_type),
            lambda pods, one: self.one(pods, one, queue_type),
            self._config.plan,
        )

    async def utilisation(self, plan: UtilisationPlan) -> dict[str, Any]:
        return await measure_utilisation(
            plan, lambda name: self.setup(name, plan.queue_type), self._connection, say
        )


async def run(config: Config) -> dict[str, Any]:
    """Every contender on every queue type, then the batching and the utilisation runs; the
    results as JSON."""
    skipped = {n: why for n in config.contenders if (why := contenders.missing(n)) is not None}
    for name, why in skipped.items():
        say(f"bench: {name} skipped: {why}")
    chosen = [n for n in config.contenders if n not in skipped]
    # Read before the first contender: the code, versions and machine measured, as they were.
    described = await describe(config.url)
    connection = await aio_pika.connect_robust(
        config.url, client_properties={"connection_name": "bench"}
    )
    runs: list[dict[str, Any]] = []
    batching: dict[str, Any] = {}
    utilisation: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="asya-bench-") as logs:
            runner = _Runner(config, connection, Path(logs))
            for queue_type in config.queue_types:
                for round_ in range(config.rounds):
                    for name in rotated(chosen, round_):
                        setup = runner.setup(name, queue_type, round_)
                        run_ = await runner.one(
                            contenders.make(name, setup), config.plan, queue_type
                        )
                        runs.append({**run_, "round": round_} if config.rounds > 1 else run_)
            if config.batching is not None:
                for queue_type in config.queue_types:
                    batching[queue_type] = await runner.batching(config.batching, queue_type)
            if config.utilisation is not None:
                utilisation = await runner.utilisation(config.utilisation)
    finally:
        await connection.close()
    return {
        **described,
        "broker": {**described["broker"], "cpu_measured": runner.broker_pid is not None},
        "settings": _settings(config),
        "skipped": skipped,
        "runs": runs,
        "ratios": report.ratios(runs),
        **({"ratio_rounds": report.ratio_rounds(runs)} if config.rounds > 1 else {}),
        "batching": batching,
        "utilisation": utilisation,
    }


def rotated(names: Sequence[str], round_: int) -> list[str]:
    """`names` starting at the `round_`-th (modulo their count): each round starts one later."""
    shift = round_ % len(names) if names else 0
    return [*names[shift:], *names[:shift]]


def _settings(config: Config) -> dict[str, Any]:
    return {
        "contenders": list(config.contenders),
        "queue_types": list(config.queue_types),
        "hops": config.hops,
        "inflight_per_hop": config.inflight,
        "rounds": config.rounds,
        "payload_bytes": config.plan.payload_bytes,
        "saturation_messages": config.plan.count,
        "warmup_messages": config.plan.warmup,
        "light_rates_per_s": list(config.plan.rates),
        "light_messages": config.plan.light_count,
        "persistent": True,
        "publisher_confirms": True,
    }


def succeeded(results: dict[str, Any]) -> bool:
    """Every run finished and delivered every message exactly once."""
    runs = list(results["runs"])
    for batching in results["batching"].values():
        runs += batching["sizes"]
    utilisation = results.get("utilisation", {}).get("rows", [])
    if not all(
        "error" not in r and r["delivery"]["arrived"] == r["delivery"]["sent"] for r in utilisation
    ):
        return False
    return all(
        "error" not in r
        and r["delivery"]["arrived"] == r["delivery"]["sent"]
        and r["delivery"]["duplicates"] == 0
        and r["delivery"]["unreadable"] == 0
        for r in runs
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    config = config_from(args)
    results = event_loop.run(run(config))
    config.output.parent.mkdir(parents=True, exist_ok=True)
    config.output.write_text(report.to_json(results))
    print(report.table(results))
    say(f"bench: results written to {config.output}")
    return 0 if succeeded(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
