"""The results as a readable table, the ratios asya / peer, and the JSON written to disk."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from bench.contenders import ASYA, PEERS

_ENVIRONMENT_ROLES = ("broker", "bench")


def to_json(results: dict[str, Any]) -> str:
    return json.dumps(results, indent=2) + "\n"


def progress(measured: dict[str, Any]) -> str:
    """One line about a finished contender run, for stderr."""
    line = f"{measured['saturation']['per_s']:.0f} msgs/s"
    for light in measured.get("light", []):
        line += f"; at {light['rate_per_s']:g}/s p50 {light['p50_ms']} ms p99 {light['p99_ms']} ms"
    delivery = measured["delivery"]
    lost = delivery["sent"] - delivery["arrived"]
    return line + (f"; {lost} not delivered" if lost else "; all delivered once")


def ratios(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Throughput of each asya contender over each other contender, per queue type: over
    several rounds (`--rounds`), the median of the rounds' ratios."""
    return {
        queue_type: {pair: round(statistics.median(values), 3) for pair, values in pairs.items()}
        for queue_type, pairs in ratio_rounds(runs).items()
    }


def ratio_rounds(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """Each round's ratios, per queue type and pair: a ratio divides two runs of one round only
    (a run without a "round" is of round 0), and a pair is left out of a round where either
    side failed."""
    by_round: dict[tuple[str, int], dict[str, float]] = {}
    for run in runs:
        if "saturation" in run:
            rates = by_round.setdefault((run["queue_type"], run.get("round", 0)), {})
            rates[run["contender"]] = run["saturation"]["per_s"]
    found: dict[str, dict[str, list[float]]] = {}
    for (queue_type, _), rates in sorted(by_round.items()):
        for mine in ASYA:
            for other in _compared_with(mine):
                if mine in rates and other in rates:
                    pairs = found.setdefault(queue_type, {})
                    pairs.setdefault(f"{mine} / {other}", []).append(
                        round(rates[mine] / rates[other], 3)
                    )
    return found


def _compared_with(mine: str) -> list[str]:
    # Every peer, and the asya contenders after this one (pods / serve, not serve / pods too).
    return [*ASYA[ASYA.index(mine) + 1 :], *PEERS]


def table(results: dict[str, Any]) -> str:
    settings = results["settings"]
    asya = results["asya"]
    commit = (asya["commit"] or "unknown")[:10] + (
        " (uncommitted changes)" if asya["dirty"] else ""
    )
    lines = [
        f"asya bench: {settings['hops']} hops, {settings['payload_bytes']}-byte payloads,"
        f" {settings['inflight_per_hop']} in flight per hop, persistent, publisher confirms;"
        f" {settings['saturation_messages']} messages at saturation;"
        f" {results['machine']['cpus']} cores; RabbitMQ {results['broker']['version']};"
        f" asya {commit}",
        "",
    ]
    if results["runs"]:
        lines += _throughput(results["runs"], settings["light_rates_per_s"])
        rounds = results.get("ratio_rounds")
        lines += [
            "",
            "ratios of throughput (same queue type, same run)"
            + (f": median of {settings['rounds']} rounds (range)" if rounds else ":"),
        ]
        for queue_type, pairs in results["ratios"].items():
            lines.append(
                f"  {queue_type:8} "
                + "   ".join(
                    f"{k} {v:.2f}" + (_range(rounds[queue_type][k]) if rounds else "")
                    for k, v in pairs.items()
                )
            )
        lines += ["", "CPU ms per message at saturation, by role; peak RSS MiB:"]
        lines += _resources(results["runs"])
    for name, why in results["skipped"].items():
        lines.append(f"skipped {name}: {why}")
    notes = sorted({f"{r['contender']}: {n}" for r in results["runs"] for n in r.get("notes", [])})
    lines += [f"note: {n}" for n in notes]
    if results["batching"]:
        lines.append("")
    for queue_type, batching in results["batching"].items():
        lines.append(_batching(queue_type, batching))
    if results.get("utilisation"):
        lines += [*([""] if lines[-1] else []), *utilisation(results["utilisation"])]
    return "\n".join(lines)


def _label(run: dict[str, Any]) -> str:
    """The contender, and its round where there are several (`#1` first)."""
    return str(run["contender"]) + (f" #{run['round'] + 1}" if "round" in run else "")


def _range(values: Sequence[float]) -> str:
    return f" ({min(values):.2f} to {max(values):.2f})"


def _throughput(runs: Iterable[dict[str, Any]], rates: Sequence[float]) -> list[str]:
    header = f"{'queue':8} {'contender':14} {'msgs/s':>8}"
    for rate in rates:
        header += f" {f'p50@{rate:g}/s':>11} {f'p99@{rate:g}/s':>11}"
    lines = [header + "  (latency ms, end to end)"]
    for run in runs:
        row = f"{run['queue_type']:8} {_label(run):14}"
        if "error" in run:
            lines.append(row + " FAILED: " + run["error"].splitlines()[0])
            continue
        row += f" {run['saturation']['per_s']:8.1f}"
        for light in run["light"]:
            row += f" {light['p50_ms']:11.2f} {light['p99_ms']:11.2f}"
        delivery = run["delivery"]
        if delivery["arrived"] != delivery["sent"] or delivery["duplicates"]:
            row += f"  DELIVERY: {delivery}"
        lines.append(row)
    return lines


def _resources(runs: Iterable[dict[str, Any]]) -> list[str]:
    lines = []
    for run in runs:
        if "error" in run:
            continue
        per = run["cpu_ms_per_message"]
        own = {r: v for r, v in per.items() if r not in _ENVIRONMENT_ROLES}
        parts = [f"{role} {value:.3f}" for role, value in own.items()]
        total = sum(own.values())
        env = [f"{role} {per[role]:.3f}" for role in _ENVIRONMENT_ROLES if role in per]
        rss = ", ".join(f"{role} {mib:.0f}" for role, mib in run["peak_rss_mib"].items())
        lines.append(
            f"  {run['queue_type']:8} {_label(run):14} total {total:.3f} ({', '.join(parts)});"
            f" {', '.join(env)} | RSS {rss}"
        )
    return lines


def _batching(queue_type: str, batching: dict[str, Any]) -> str:
    sizes = []
    for size in batching["sizes"]:
        if "saturation" in size:
            sizes.append(
                f"batch {size['batch']}: {size['saturation']['per_s']:.1f}/s"
                f" (ideal {size['ideal_per_s']:.1f})"
            )
        else:
            sizes.append(f"batch {size['batch']}: FAILED")
    ratio = batching["ratio_largest_to_smallest"]
    done = [s["batch"] for s in batching["sizes"]]
    head = (
        f"batching through the pods ({queue_type}; a call costs"
        f" {batching['fixed_ms']:g} ms + {batching['item_ms']:g} ms per item): "
    )
    tail = f"; batch {max(done)} vs {min(done)}: {ratio:.1f}x" if ratio is not None else ""
    return head + ", ".join(sizes) + tail


def utilisation(measured: dict[str, Any]) -> list[str]:
    """The device utilisation runs (`bench.utilisation`) as a table, one row per run."""
    low, high = measured["steady_window"]
    depth = measured["pipeline_depth"]
    lines = [
        "device utilisation: items/s of the device-bound handler alone (a plain loop) and"
        f" through asya, in steady state (completions {low:.0%} to {high:.0%});"
        f" ASYA_PIPELINE_DEPTH {'unset' if depth is None else depth}:",
        f"  {'path':26} {'batch':>5} {'device ms':>9} {'standalone/s':>12} {'asya/s':>9}"
        f" {'share':>6}",
    ]
    for row in measured["rows"]:
        head = f"  {_path(row):26} {row['batch']:5d} {row['device_ms']:9g}"
        if "error" in row:
            lines.append(head + " FAILED: " + row["error"].splitlines()[0])
            continue
        lines.append(
            head + f" {row['standalone_per_s']:12.1f} {row['asya_per_s']:9.1f} {row['share']:6.2f}"
        )
    return lines


def _path(row: dict[str, Any]) -> str:
    where = "local GPU worker" if row["path"] == "local" else "pod"
    return f"{where} ({row['transport']})"
