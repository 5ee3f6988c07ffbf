"""`asya gpus`: the GPUs NVML sees on this machine, as a table or JSON (`-o json`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import msgspec

from asya.cli.options import EXIT_OK
from asya.gpu import Inventory, read_inventory
from asya.settings import Settings

if TYPE_CHECKING:
    from asya.cli.options import Subparsers

_MIB = 1024 * 1024


def add_parser(commands: Subparsers) -> None:
    gpus = commands.add_parser(
        "gpus",
        help="list this machine's GPUs (NVML) and the flavor each counts as",
        description=(
            "List the GPUs NVML sees: index, UUID, product, the flavor it counts as (the"
            " product name normalised: NVIDIA H100 80GB HBM3 -> h100-80gb-hbm3), memory used"
            " and total, utilisation and MIG mode. asya dev and asya serve give GPU actors'"
            " workers these devices. A machine without NVML (no NVIDIA driver, or the gpu"
            " extra not installed) has no GPUs: that is said, and the exit code is 0."
        ),
    )
    gpus.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default="table",
        help="table (default) or json (memory in bytes)",
    )
    gpus.set_defaults(run=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    inventory = read_inventory()
    if args.output == "json":
        print(msgspec.json.encode(inventory).decode())
    else:
        print(format_inventory(inventory))
    return EXIT_OK


def format_inventory(inventory: Inventory) -> str:
    """One row per device; for none, a line saying so and why."""
    if not inventory.devices:
        why = f": {inventory.unavailable}" if inventory.unavailable else ""
        return f"no GPUs{why}"
    header = ("index", "uuid", "name", "flavor", "memory used/total", "util", "mig")
    rows = [
        (
            str(d.index),
            d.uuid,
            d.name,
            d.flavor,
            f"{d.memory_used_bytes // _MIB} / {d.memory_total_bytes // _MIB} MiB",
            "-" if d.utilization_percent is None else f"{d.utilization_percent}%",
            d.mig.value,
        )
        for d in inventory.devices
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (header, tuple("-" * w for w in widths), *rows)
    ]
    return "\n".join(lines)
