"""The GPU check's model, as an asya app and as a plain loop (`bench/gpu_check.py` runs both).

The model is a real one with random weights (nothing is downloaded): an MLP 2048 → 8192 → 8192
→ 2048 in bf16, GELU between its layers, applied to 512 tokens per item, so each item is a
[512, 2048] input and about 103 GFLOP. An item's payload is only its seed (`{"seed": 7}`): the
handler builds the input on the device from it, so envelopes stay tiny and what is measured is
the model and the framework around it, not the copying of tensors.

As an app (`asya dev bench.gpu_model --input ...`): `GpuMlp` is a GPU batch actor, one replica,
its model loaded once in `__init__`; `asya dev` runs it in a worker process of its own, with the
GPU it assigns. Its batch size, batch wait and CPU fallback are read from `BENCH_GPU_BATCH`
(32), `BENCH_GPU_BATCH_WAIT_MS` (5) and `BENCH_GPU_CPU_FALLBACK` (0) when the module is
imported, so the runner and its worker process declare the same actor.

As a plain loop (`python -m bench.gpu_model --batch B --items N`): the same model in a process
of its own, timed after a warm-up, results left on the device and one synchronize at the end;
then, timed apart, the same loop calling the model as the handler does (each batch's results
copied to the host, so each call waits for the device before the next is launched); it prints
one JSON line with both.

The model's shape and device come from `BENCH_GPU_MODEL` (a `ModelConfig` in JSON; unset, the
real one on CUDA; the CPU smoke test's is tiny). PyTorch is imported only where the model is
built (never by `asya dev`'s own process), through importlib, so that the module imports and
type-checks where torch is not installed.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import os
import time
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from asya import actor
from asya.envelope import Payload

CONFIG_VARIABLE: Final = "BENCH_GPU_MODEL"
"""The `ModelConfig` (JSON) of the processes that build the model; unset: `GPU_CONFIG`."""
BATCH_VARIABLE: Final = "BENCH_GPU_BATCH"
BATCH_WAIT_VARIABLE: Final = "BENCH_GPU_BATCH_WAIT_MS"
CPU_FALLBACK_VARIABLE: Final = "BENCH_GPU_CPU_FALLBACK"

ROUTE: Final = ["gpu-mlp"]
"""The route of the bare payloads `asya dev` is given."""


class ModelConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What to build and where: the layer widths, tokens per item, dtype and device."""

    dims: tuple[int, ...] = (2048, 8192, 8192, 2048)
    """Widths of the layers' inputs and outputs: three Linear layers for four widths."""
    tokens: int = 512
    """Rows of one item's input: an item is a [tokens, dims[0]] tensor."""
    dtype: str = "bfloat16"
    device: str = "cuda"
    threads: int | None = None
    """torch's CPU threads; None leaves torch's default (the CPU smoke test takes 1)."""
    device_ms: float | None = None
    """Instead of the model, each call keeps the device busy this long (a GPU sleep kernel, or
    a sleep on CPU): a known device time per call, so that what is left is the framework's."""
    warmup_batch: int = 32
    """The batch size the model is warmed up at (beside 1) before it takes calls."""

    def encode(self) -> str:
        return msgspec.json.encode(self).decode()

    @classmethod
    def decode(cls, text: str | None) -> ModelConfig:
        return GPU_CONFIG if not text else msgspec.json.decode(text, type=cls)


GPU_CONFIG: Final = ModelConfig()
CPU_CONFIG: Final = ModelConfig(
    dims=(64, 256, 256, 64), tokens=16, dtype="float32", device="cpu", threads=1
)
"""The smoke test's: tiny, on CPU, one thread (it checks the code path, measures nothing)."""


class Mlp:
    """The model with random weights (seed 0), and how an item's input is made from its seed."""

    def __init__(self, config: ModelConfig) -> None:
        self._torch: Any = importlib.import_module("torch")
        torch = self._torch
        if config.threads is not None:
            torch.set_num_threads(config.threads)
        if config.device.startswith("cuda") and not torch.cuda.is_available():
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            raise RuntimeError(
                f"CUDA is not available in this process (CUDA_VISIBLE_DEVICES={visible!r});"
                " the GPU check needs the GPU asya assigned"
            )
        self.config = config
        self._device = torch.device(config.device)
        self._dtype = getattr(torch, config.dtype)
        torch.manual_seed(0)
        layers: list[Any] = []
        for index, (width_in, width_out) in enumerate(itertools.pairwise(config.dims)):
            if index:
                layers.append(torch.nn.GELU())
            layers.append(
                torch.nn.Linear(width_in, width_out, device=self._device, dtype=self._dtype)
            )
        self._net = torch.nn.Sequential(*layers).eval()
        self._inputs = torch.Generator(device=self._device)
        self._sleep_cycles = self._calibrate_sleep() if config.device_ms is not None else None
        for size in sorted({1, config.warmup_batch}):
            self.results(range(size))

    @property
    def device_name(self) -> str:
        if self._device.type == "cuda":
            return str(self._torch.cuda.get_device_name(self._device))
        return "cpu"

    def forward(self, seeds: Sequence[int]) -> Any:
        """One result per item (the mean of its output), left on the device."""
        torch = self._torch
        with torch.inference_mode():
            if self.config.device_ms is not None:
                return self._busy(len(seeds))
            inputs = torch.empty(
                (len(seeds), self.config.tokens, self.config.dims[0]),
                device=self._device,
                dtype=self._dtype,
            )
            for row, seed in zip(inputs, seeds, strict=True):
                self._inputs.manual_seed(seed)
                row.normal_(generator=self._inputs)
            return self._net(inputs).float().mean(dim=(1, 2))

    def results(self, seeds: Sequence[int]) -> list[float]:
        """`forward`, copied to the host: what a handler returns waits for the device."""
        values: list[float] = self.forward(seeds).tolist()
        return values

    def synchronize(self) -> None:
        if self._device.type == "cuda":
            self._torch.cuda.synchronize(self._device)

    def _busy(self, items: int) -> Any:
        assert self.config.device_ms is not None
        if self._sleep_cycles is None:
            time.sleep(self.config.device_ms / 1000)
        else:
            self._torch.cuda._sleep(self._sleep_cycles)
        return self._torch.zeros(items, device=self._device)

    def _calibrate_sleep(self) -> int | None:
        """GPU clock cycles that take `device_ms`, timed with CUDA events; None on CPU."""
        assert self.config.device_ms is not None
        if self._device.type != "cuda":
            return None
        torch = self._torch
        probe = 10_000_000
        torch.cuda._sleep(probe)  # the first launch pays for loading the kernel
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(probe)
        end.record()
        end.synchronize()
        return max(1, int(probe * self.config.device_ms / start.elapsed_time(end)))


@actor(
    name="gpu-mlp",
    gpus=1,
    batch=int(os.environ.get(BATCH_VARIABLE, "32")),
    batch_wait_ms=int(os.environ.get(BATCH_WAIT_VARIABLE, "5")),
    cpu_fallback=os.environ.get(CPU_FALLBACK_VARIABLE) == "1",
    max_replicas=1,
    timeout_s=300,
)
class GpuMlp:
    """The model as a GPU batch actor: `{"seed": n}` in, `{"seed": n, "mean": x}` out."""

    def __init__(self) -> None:
        self._model = Mlp(ModelConfig.decode(os.environ.get(CONFIG_VARIABLE)))

    def __call__(self, items: list[Payload]) -> list[Payload]:
        means = self._model.results([int(item["seed"]) for item in items])
        return [
            {"seed": item["seed"], "mean": mean} for item, mean in zip(items, means, strict=True)
        ]


def plain_loop(
    model: Mlp, batch: int, items: int, warmup_batches: int, *, per_call: bool = False
) -> dict[str, Any]:
    """`items` items through `model`, `batch` at a time, timed after a warm-up; results stay
    on the device and the clock stops after one synchronize at the end. With `per_call`, each
    batch's results are copied to the host instead, as the handler does: the device waits for
    the next call's launch after each one, which no framework can hide. Times are wall-clock
    (time.time()), to be compared with nvidia-smi's samples and asya's envelopes."""
    call = model.results if per_call else model.forward
    for _ in range(warmup_batches):
        call(range(batch))
    model.synchronize()
    results = []
    started_s = time.time()
    for first in range(0, items, batch):
        results.append(call(range(first, min(first + batch, items))))
    model.synchronize()
    ended_s = time.time()
    return {
        "items": items,
        "started_s": started_s,
        "ended_s": ended_s,
        "items_per_s": items / (ended_s - started_s),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.gpu_model`: the plain loop, in a process of its own; one JSON line."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.gpu_model",
        description="The GPU check's model in a plain loop (BENCH_GPU_MODEL: its config).",
    )
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--items", type=int, required=True)
    parser.add_argument("--warmup-batches", type=int, default=10)
    args = parser.parse_args(argv)
    model = Mlp(ModelConfig.decode(os.environ.get(CONFIG_VARIABLE)))
    figures = plain_loop(model, args.batch, args.items, args.warmup_batches)
    figures["per_call"] = plain_loop(
        model, args.batch, args.items, args.warmup_batches, per_call=True
    )
    torch: Any = importlib.import_module("torch")
    figures.update(torch=str(torch.__version__), device=model.device_name)
    print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
