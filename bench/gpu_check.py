"""GPU check: does asya keep one GPU as busy as a plain PyTorch loop does? Never part of CI.

    python3 bench/gpu_check.py          # on a GPU machine, from a checkout of this repo
    python3 bench/gpu_check.py --cpu    # smoke test of the code path without a GPU

Measures a real model with random weights on the first GPU that asya can assign (a bf16 MLP
2048 → 8192 → 8192 → 2048 over 512 tokens per item; `bench/gpu_model.py`):

1. `asya gpus` at the start, as the CLI prints it;
2. for each batch size (`--batch-sizes`, 32 and 1): the model in a plain loop, in a process of
   its own (timed after a warm-up, one `torch.cuda.synchronize` at the end), and in the same
   process the per-call loop: the model called as the handler calls it, each batch's results
   copied to the host before the next batch is launched (the device's wait for each launch is
   the handler's own cost, which no framework can hide); then the same model
   as a GPU actor (`@actor(gpus=1, batch=...)`, loaded in `__init__`) under `asya dev`
   itself (`python -m asya.cli dev bench.gpu_model`: in-memory, its worker in a process of its
   own with the GPU asya assigns), every input fed at the start, so its queue is full before
   the worker has loaded the model;
3. throughput in items/s: each loop's over its whole timed loop, asya's over its steady
   state, from the 10th to the 90th percentile of the times the actor finished its envelopes
   (each final envelope's `status.updated_at`), so that neither the worker's start nor the last
   batches count; and asya's share of each loop's: asya / plain (the target's) and asya /
   per-call (what the framework itself keeps);
4. the GPU's busy share while each ran, from `nvidia-smi --query-gpu=utilization.gpu
   --format=csv,noheader,nounits -lms 100` in the background, averaged over the same windows.

It prints a table with the targets beside the figures (at batch 32: at least 0.9 of the plain
loop's throughput and the GPU busy at least 85% of the time) and writes it all as JSON to
`--output` (default: `$OUT/gpu-check.json` where `OUT` is set, else a file in the temporary
folder). A few minutes at most at the default 16,384 items. `ASYA_*` variables reach `asya dev` as
usual, and the JSON records them. Exit code: 0 once measured (targets met or not: the table and
the JSON say which); 1 if a run failed (an envelope failed, a process failed); 2 if it cannot
run here (no torch, no GPU that asya can assign, a dependency that cannot be installed).

**What it brings.** It needs only a Python with PyTorch, the NVIDIA driver (nvidia-smi, NVML)
and this checkout. It puts the repository's root on `sys.path` and on `PYTHONPATH` (for the
processes it starts, and those `asya dev` starts), and installs what asya needs and lacks:
`msgspec` (asya's one dependency) and, on a GPU run, NVML's binding `nvidia-ml-py` (asya's `gpu`
extra, which `asya gpus` and the GPU assignment read), with `pip install --target` into a folder
of its own (`--deps-dir`, default `<tmp>/asya-gpu-check-py3X`), reused by later runs; nothing is
installed where the packages import already. `--target`, because it works wherever PyTorch
usually lives: `pip install --user` is refused inside a virtual environment (GPU images often
keep torch in one) and by an externally-managed system Python (PEP 668); a new venv made with
`--system-site-packages` sees the base interpreter's packages, not those of the venv that holds
torch, and needs the venv module. Where `--wheels` names a folder (default `.whl/` in the
checkout, where present) its wheels are tried alone first (`--no-index`), then the package
index: a machine that reaches no index needs the wheels brought, e.g. fetched elsewhere with
`pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 -d .whl
msgspec`.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import importlib.util
import json
import os
import platform
import pty
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
APP: Final = "bench.gpu_model"
TARGET_BATCH: Final = 32
"""The batch size the targets are judged at."""
TARGET_SHARE: Final = 0.9
"""asya's steady throughput at batch 32, as a share of the plain loop's."""
TARGET_BUSY_PERCENT: Final = 85.0
"""The GPU's busy share while asya runs at batch 32."""
SAMPLE_INTERVAL_MS: Final = 100
MIN_COMPLETIONS: Final = 10
"""Fewer finished envelopes than this give no steady rate."""
EXIT_OK, EXIT_FAILED, EXIT_CANNOT_RUN = 0, 1, 2


class CannotRunError(Exception):
    """The check cannot run on this machine; the message says what is missing and what to do."""


# ---- bringing what asya needs ---------------------------------------------------------------


def bootstrap(*, gpu: bool, deps_dir: Path, wheels: Path | None) -> None:
    """Make the checkout's `asya` and its dependencies importable here and in child processes.

    Raises:
        CannotRunError: torch is missing, or a dependency could not be installed.
    """
    # Run as `python bench/gpu_check.py`, the script's folder comes first on sys.path, where
    # `bench/cli.py` and its siblings would shadow top-level modules: the root replaces it.
    if sys.path and Path(sys.path[0] or ".").resolve() == REPO_ROOT / "bench":
        sys.path[0] = str(REPO_ROOT)
    _use_path(REPO_ROOT, first=True)
    if importlib.util.find_spec("torch") is None:
        raise CannotRunError(
            f"PyTorch is not installed for {sys.executable}: run the check with the Python"
            " that has torch (python3 -c 'import torch' must work)"
        )
    needed = {"msgspec": "msgspec>=0.18"}
    if gpu:
        needed["pynvml"] = "nvidia-ml-py>=12"
    missing = _missing(needed)
    if missing and deps_dir.is_dir():
        _use_path(deps_dir, first=False)
        missing = _missing(needed)
    if not missing:
        return
    _install(missing, deps_dir, wheels)
    _use_path(deps_dir, first=False)
    still = _missing(needed)
    if still:
        raise CannotRunError(f"{' '.join(still)} still cannot be imported from {deps_dir}")


def _install(requirements: list[str], deps_dir: Path, wheels: Path | None) -> None:
    """`pip install --target deps_dir`, from `wheels` alone first (where given), then from the
    package index.

    Raises:
        CannotRunError: neither worked.
    """
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    command += ["--no-deps", "--upgrade", "--target", str(deps_dir)]
    sources = [["--no-index", "--find-links", str(wheels)]] if wheels is not None else []
    sources.append([])
    for source in sources:
        where = f"the wheels in {wheels}" if source else "the package index"
        _say(f"installing {' '.join(requirements)} into {deps_dir} from {where}")
        try:
            subprocess.run([*command, *source, *requirements], check=True)
            return
        except (OSError, subprocess.CalledProcessError) as exc:
            _say(f"pip failed: {exc}")
    raise CannotRunError(
        f"could not install {' '.join(requirements)} with pip; install them for"
        f" {sys.executable} by hand, or put their wheels in a folder and pass --wheels"
    )


def _missing(needed: dict[str, str]) -> list[str]:
    importlib.invalidate_caches()
    return [req for module, req in needed.items() if importlib.util.find_spec(module) is None]


def _use_path(folder: Path, *, first: bool) -> None:
    entry = str(folder)
    if entry not in sys.path:
        sys.path.insert(0, entry) if first else sys.path.append(entry)
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if entry not in inherited:
        ordered = [entry, *inherited] if first else [*inherited, entry]
        os.environ["PYTHONPATH"] = os.pathsep.join(ordered)


# ---- what the machine says --------------------------------------------------------------------


def asya_gpus() -> tuple[str, dict[str, Any]]:
    """`asya gpus` as the CLI prints it, and its JSON (`-o json`).

    Raises:
        subprocess.CalledProcessError: the command failed.
    """

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "asya.cli", "gpus", *args],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO_ROOT,
        )
        return done.stdout.strip()

    inventory: dict[str, Any] = json.loads(cli("-o", "json"))
    return cli(), inventory


def first_assignable(inventory: dict[str, Any]) -> str | None:
    """The UUID of the device asya hands out first (the lowest index not split by MIG)."""
    devices = sorted(inventory.get("devices", []), key=lambda d: d["index"])
    return next((d["uuid"] for d in devices if d["mig"] != "enabled"), None)


class BusySampler:
    """`nvidia-smi ... -lms 100` in the background, each sample stamped with time.time().

    nvidia-smi writes to a pseudo-terminal, so that its C library flushes each line as it is
    sampled (into a pipe it would hold lines back in a buffer, and lose them when stopped).
    """

    def __init__(self, device_uuid: str | None) -> None:
        self._command = [
            "nvidia-smi",
            "--query-gpu=utilization.gpu",
            "--format=csv,noheader,nounits",
            "-lms",
            str(SAMPLE_INTERVAL_MS),
            *(["-i", device_uuid] if device_uuid else []),
        ]
        self.samples: list[tuple[float, int]] = []
        self._process: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._terminal = -1

    def __enter__(self) -> BusySampler:
        try:
            self._terminal, child_end = pty.openpty()
        except OSError as exc:  # no pseudo-terminals here: a pipe, whose lines may come late
            _say(f"no pseudo-terminal ({exc}): nvidia-smi's samples may be stamped late")
            self._terminal, child_end = os.pipe()
        try:
            self._process = subprocess.Popen(
                self._command, stdin=subprocess.DEVNULL, stdout=child_end, stderr=child_end
            )
        finally:
            os.close(child_end)
        self._reader = threading.Thread(target=self._read, name="nvidia-smi", daemon=True)
        self._reader.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._reader is not None:
            self._reader.join(5)
        with contextlib.suppress(OSError):
            os.close(self._terminal)

    def mean_between(self, start_s: float, end_s: float) -> tuple[float | None, int]:
        """The mean busy percent of the samples taken from `start_s` to `end_s`, and how many."""
        inside = [busy for at, busy in self.samples if start_s <= at <= end_s]
        return (sum(inside) / len(inside) if inside else None), len(inside)

    def _read(self) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(self._terminal, 4096)
            except OSError:  # EIO: nvidia-smi exited and its terminal closed
                return
            if not chunk:
                return
            now = time.time()
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                text = line.strip()
                if text.isdigit():  # "[N/A]" and error lines are not samples
                    self.samples.append((now, int(text)))


class _NoSampler(BusySampler):
    """No nvidia-smi (the CPU smoke test, or none on PATH): no samples."""

    def __enter__(self) -> BusySampler:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None


# ---- the runs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """What every run of one check shares: the model, the items, the device and the sampler."""

    items: int
    model_config: str
    """The model's `ModelConfig`, as JSON (`BENCH_GPU_MODEL`)."""
    wait_ms: int
    cpu_fallback: bool
    device: str | None
    """The UUID of the GPU the actor's worker gets; None on the CPU smoke test."""
    sampler: type[BusySampler]
    workdir: Path

    def environment(self, batch: int) -> dict[str, str]:
        from bench import gpu_model

        return {
            **os.environ,
            gpu_model.CONFIG_VARIABLE: self.model_config,
            gpu_model.BATCH_VARIABLE: str(batch),
            gpu_model.BATCH_WAIT_VARIABLE: str(self.wait_ms),
            gpu_model.CPU_FALLBACK_VARIABLE: "1" if self.cpu_fallback else "0",
        }


def measure_plain(run: Run, batch: int) -> dict[str, Any]:
    """The plain loop in a process of its own, on the device the actor's worker gets.

    Raises:
        subprocess.CalledProcessError: the loop failed.
    """
    env = {**run.environment(batch), "CUDA_VISIBLE_DEVICES": run.device or ""}
    command = [sys.executable, "-m", APP, "--batch", str(batch), "--items", str(run.items)]
    with run.sampler(run.device) as sampler:
        done = subprocess.run(
            command, stdout=subprocess.PIPE, text=True, check=True, cwd=REPO_ROOT, env=env
        )
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    for loop in (figures, figures["per_call"]):
        busy, samples = sampler.mean_between(loop["started_s"], loop["ended_s"])
        loop.update(
            elapsed_s=loop["ended_s"] - loop["started_s"],
            gpu_busy_percent=busy,
            gpu_busy_samples=samples,
        )
    return figures


def measure_asya(run: Run, batch: int) -> dict[str, Any]:
    """`asya dev bench.gpu_model` over `run.items` inputs, the final envelopes to a file.

    Raises:
        subprocess.CalledProcessError: `asya dev` failed other than by failed envelopes.
    """
    inputs = run.workdir / "inputs.jsonl"
    if not inputs.exists():
        inputs.write_text("".join(f'{{"seed": {i}}}\n' for i in range(run.items)))
    finals = run.workdir / f"finals-batch-{batch}.jsonl"
    command = [sys.executable, "-m", "asya.cli", "dev", APP, "--input", str(inputs)]
    command += ["--output", str(finals)]
    started_s = time.time()
    with run.sampler(run.device) as sampler:
        done = subprocess.run(
            command, stdout=subprocess.DEVNULL, cwd=REPO_ROOT, env=run.environment(batch)
        )
    elapsed_s = time.time() - started_s
    if done.returncode not in (0, 1):  # 1: an envelope failed, counted below
        raise subprocess.CalledProcessError(done.returncode, command)
    completions_s, failed = _completions(finals)
    from bench.steady import steady_window

    window = None
    if len(completions_s) >= MIN_COMPLETIONS:
        with contextlib.suppress(ValueError):  # all at one instant: no rate
            window = steady_window(completions_s)
    figures: dict[str, Any] = {
        "items": run.items,
        "succeeded": len(completions_s),
        "failed": failed,
        "elapsed_s": elapsed_s,
        "first_result_s": min(completions_s) - started_s if completions_s else None,
        "items_per_s": window.per_s if window else None,
        "window_s": None,
        "window_items": None,
        "gpu_busy_percent": None,
        "gpu_busy_samples": 0,
    }
    if window is not None:
        busy, samples = sampler.mean_between(window.start_s, window.end_s)
        figures.update(
            window_s=window.seconds,
            window_items=window.items,
            gpu_busy_percent=busy,
            gpu_busy_samples=samples,
        )
    return figures


def _completions(finals: Path) -> tuple[list[float], int]:
    """When the actor finished each envelope that succeeded (`status.updated_at`, stamped as
    its outputs were routed), and how many failed."""
    completions, failed = [], 0
    with finals.open(encoding="utf-8") as lines:
        for line in lines:
            status = json.loads(line)["status"]
            if status["phase"] != "succeeded":
                failed += 1
                continue
            updated = datetime.datetime.fromisoformat(status["updated_at"])
            completions.append(updated.timestamp())
    return completions, failed


@dataclass
class BatchResult:
    batch: int
    plain: dict[str, Any] = field(default_factory=dict)
    asya: dict[str, Any] = field(default_factory=dict)

    @property
    def share(self) -> float | None:
        """asya's throughput as a share of the plain loop's (the target's)."""
        return _ratio(self.asya.get("items_per_s"), self.plain.get("items_per_s"))

    @property
    def per_call_share(self) -> float | None:
        """asya's throughput as a share of the per-call loop's: what the framework keeps."""
        per_call = self.plain.get("per_call", {})
        return _ratio(self.asya.get("items_per_s"), per_call.get("items_per_s"))

    def targets(self, *, judged: bool) -> dict[str, Any]:
        if not judged or self.batch != TARGET_BATCH:
            return {}
        busy = self.asya.get("gpu_busy_percent")
        return {
            "share": {"target": TARGET_SHARE, "met": (self.share or 0.0) >= TARGET_SHARE},
            "gpu_busy_percent": {
                "target": TARGET_BUSY_PERCENT,
                "met": busy is not None and busy >= TARGET_BUSY_PERCENT,
            },
        }


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator and denominator else None


# ---- the report -------------------------------------------------------------------------------


def format_table(results: Sequence[BatchResult], *, judged: bool) -> str:
    from asya.local.report import aligned  # importable once `bootstrap` has run

    header = (
        "batch",
        "plain items/s",
        "per-call items/s",
        "asya items/s",
        "asya/plain",
        "asya/per-call",
        "GPU busy, asya",
        "GPU busy, plain",
        "GPU busy, per-call",
        "first result",
    )
    rows = [header]
    for result in results:
        targets = result.targets(judged=judged)
        per_call = result.plain.get("per_call", {})
        rows.append(
            (
                str(result.batch),
                _number(result.plain.get("items_per_s")),
                _number(per_call.get("items_per_s")),
                _number(result.asya.get("items_per_s")),
                _number(result.share, "{:.2f}") + _verdict(targets.get("share"), "≥ {:.2f}"),
                _number(result.per_call_share, "{:.2f}"),
                _number(result.asya.get("gpu_busy_percent"), "{:.0f}%")
                + _verdict(targets.get("gpu_busy_percent"), "≥ {:.0f}%"),
                _number(result.plain.get("gpu_busy_percent"), "{:.0f}%"),
                _number(per_call.get("gpu_busy_percent"), "{:.0f}%"),
                _number(result.asya.get("first_result_s"), "{:.1f} s"),
            )
        )
    return "\n".join(aligned(rows))


def _number(value: float | None, form: str = "{:,.0f}") -> str:
    return "-" if value is None else form.format(value)


def _verdict(target: dict[str, Any] | None, form: str) -> str:
    if not target:
        return ""
    return f" ({form.format(target['target'])}: {'met' if target['met'] else 'MISSED'})"


def build_report(
    args: argparse.Namespace,
    run: Run,
    started: datetime.datetime,
    gpus: tuple[str, dict[str, Any]],
    results: Sequence[BatchResult],
    *,
    judged: bool,
) -> dict[str, Any]:
    from bench.steady import STEADY_HIGH, STEADY_LOW

    plain = next((r.plain for r in results if r.plain), {})
    verdicts = [t["met"] for r in results for t in r.targets(judged=judged).values()]
    return {
        "check": "asya GPU check (bench/gpu_check.py)",
        "mode": "cpu smoke test" if args.cpu else "gpu",
        "started_at": started.isoformat(),
        "python": platform.python_version(),
        "torch": plain.get("torch"),
        "device": plain.get("device"),
        "asya_gpus": {"table": gpus[0], "inventory": gpus[1]},
        "config": {
            "model": json.loads(run.model_config),
            "items": run.items,
            "batch_sizes": list(args.batch_sizes),
            "batch_wait_ms": run.wait_ms,
            "steady_window_percentiles": [STEADY_LOW, STEADY_HIGH],
            "gpu_busy_sample_ms": SAMPLE_INTERVAL_MS,
            "asya_environment": {k: v for k, v in os.environ.items() if k.startswith("ASYA_")},
        },
        "runs": [
            {
                "batch": r.batch,
                "plain": r.plain,
                "asya": r.asya,
                "share": r.share,
                "per_call_share": r.per_call_share,
                "targets": r.targets(judged=judged),
            }
            for r in results
        ],
        "targets_met": (all(verdicts) if verdicts else None) if judged else None,
    }


def summary(report: dict[str, Any], *, judged: bool) -> str:
    where = f"{report['device']}, torch {report['torch']}, Python {report['python']}"
    if not judged:
        return f"{where}. Smoke test on CPU: the code path ran; targets are not judged."
    met = report["targets_met"]
    verdict = "not judged (no batch 32)" if met is None else ("met" if met else "MISSED")
    return (
        f"{where}. Targets at batch {TARGET_BATCH}: asya ≥ {TARGET_SHARE:.2f} of the plain loop,"
        f" GPU busy ≥ {TARGET_BUSY_PERCENT:.0f}%: {verdict}."
    )


def default_output() -> Path:
    out = os.environ.get("OUT")
    if out:
        return Path(out) / "gpu-check.json"
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    return Path(tempfile.gettempdir()) / f"asya-gpu-check-{stamp}.json"


# ---- the command ------------------------------------------------------------------------------


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"expected whole numbers separated by commas: {exc}"
        ) from exc
    if not sizes or any(v < 1 for v in sizes):
        raise argparse.ArgumentTypeError("give one batch size or more, each 1 or more")
    return sizes


def _device_ms(text: str) -> float | None:
    if text == "none":
        return None
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected 'none' or milliseconds: {exc}") from exc
    if value <= 0:
        raise argparse.ArgumentTypeError("milliseconds must be above 0")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python3 bench/gpu_check.py",
        description="asya dev against a plain PyTorch loop on one GPU: throughput and GPU busy"
        " share of a bf16 MLP at each batch size (see the module docstring). Never part of CI.",
    )
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="smoke test without a GPU: a tiny model on CPU, cpu_fallback=True, no nvidia-smi",
    )
    parser.add_argument(
        "--items", type=int, metavar="N", help="items per run (default 16384; 512 with --cpu)"
    )
    parser.add_argument(
        "--batch-sizes", type=_sizes, default=(32, 1), metavar="B,B", help="(default 32,1)"
    )
    parser.add_argument(
        "--batch-wait-ms", type=int, default=5, metavar="MS", help="the actor's (default 5)"
    )
    parser.add_argument(
        "--device-ms",
        type=_device_ms,
        default=None,
        metavar="MS",
        help="'none' (default): the model; else each call only keeps the device busy MS ms"
        " (a GPU sleep kernel), so that what is left is asya's own time",
    )
    parser.add_argument("--output", type=Path, help="the JSON file (default: $OUT, or tmp)")
    python = f"py{sys.version_info.major}{sys.version_info.minor}"
    parser.add_argument(
        "--deps-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / f"asya-gpu-check-{python}",
        help="where missing dependencies are installed (pip --target)",
    )
    wheels = REPO_ROOT / ".whl"
    parser.add_argument(
        "--wheels",
        type=Path,
        default=wheels if wheels.is_dir() else None,
        help="wheels to install missing dependencies from first (default: .whl/ if present)",
    )
    args = parser.parse_args(argv)
    if args.items is None:
        args.items = 512 if args.cpu else 16384
    if args.items < max(args.batch_sizes):
        parser.error(f"--items {args.items} is fewer than a batch of {max(args.batch_sizes)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        bootstrap(gpu=not args.cpu, deps_dir=args.deps_dir, wheels=args.wheels)
        with tempfile.TemporaryDirectory(prefix="asya-gpu-check-") as workdir:
            return check(args, Path(workdir))
    except CannotRunError as exc:
        print(f"gpu-check: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN


def check(args: argparse.Namespace, workdir: Path) -> int:
    """Everything after the bootstrap (which makes `bench.gpu_model` importable).

    Raises:
        CannotRunError: no GPU that asya can assign (unless --cpu).
    """
    import msgspec

    from bench import gpu_model

    gpus = asya_gpus()
    print(f"$ asya gpus\n{gpus[0]}\n", flush=True)
    device = None if args.cpu else first_assignable(gpus[1])
    if not args.cpu and device is None:
        why = gpus[1].get("unavailable") or "every device is split into MIG instances"
        raise CannotRunError(f"no GPU that asya can assign ({why}); --cpu runs a smoke test")
    config = gpu_model.CPU_CONFIG if args.cpu else gpu_model.GPU_CONFIG
    config = msgspec.structs.replace(config, device_ms=args.device_ms)
    sampler: type[BusySampler] = BusySampler
    if args.cpu or shutil.which("nvidia-smi") is None:
        sampler = _NoSampler
        if not args.cpu:
            _say("no nvidia-smi on PATH: no GPU busy share")
    judged = not args.cpu
    run = Run(
        items=args.items,
        model_config=config.encode(),
        wait_ms=args.batch_wait_ms,
        cpu_fallback=args.cpu,
        device=device,
        sampler=sampler,
        workdir=workdir,
    )
    started = datetime.datetime.now(datetime.UTC)
    results: list[BatchResult] = []
    failed = False
    for batch in args.batch_sizes:
        result = BatchResult(batch)
        results.append(result)
        try:
            _say(f"batch {batch}: plain loop, {args.items} items")
            result.plain = measure_plain(run, batch)
            _say(f"batch {batch}: asya dev {APP}, {args.items} items")
            result.asya = measure_asya(run, batch)
        except (subprocess.CalledProcessError, OSError, ValueError, KeyError) as exc:
            _say(f"batch {batch} failed: {exc!r}")
            failed = True
            continue
        if result.asya["failed"] or result.asya["succeeded"] != args.items:
            _say(f"batch {batch}: {result.asya['succeeded']} of {args.items} envelopes succeeded")
            failed = True
    report = build_report(args, run, started, gpus, results, judged=judged)
    output = args.output or default_output()
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\n{format_table(results, judged=judged)}\n\n{summary(report, judged=judged)}")
    print(f"JSON: {output}")
    return EXIT_FAILED if failed else EXIT_OK


def _say(line: str) -> None:
    print(f"gpu-check: {line}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
