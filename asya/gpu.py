"""The GPUs of this machine, as NVML reports them: `read_inventory`.

Each device with its index, UUID, product name, memory, utilisation, MIG mode and the flavor it
counts as (`flavor_of`: the product name normalised, so that `NVIDIA H100 80GB HBM3` is
`h100-80gb-hbm3`). A machine without NVML — no `pynvml` module (the `gpu` extra is not
installed) or an NVML library that does not start (no NVIDIA driver) — has an empty inventory
that says why, never an error: a laptop is a machine with no GPU.

NVML is reached through the narrow `Nvml` protocol, which the `pynvml` module satisfies; tests
pass their own. This is the only module that imports `pynvml`, and only when it is asked to read
the inventory. Callers: `asya gpus`, and the local runner's GPU assignment (`asya.local.gpus`).
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import re
from typing import Any, Final, Protocol

import msgspec

_MIG_ENABLED: Final = 1
"""NVML_DEVICE_MIG_ENABLE: the current MIG mode of a device split into MIG instances."""
_FLAVOR_MAX_LENGTH: Final = 63
"""A flavor name is a DNS-1123 label, as a Kubernetes ResourceFlavor's name."""


class Nvml(Protocol):
    """The part of NVML's Python binding (`pynvml`, from nvidia-ml-py) asya uses."""

    NVMLError: type[Exception]

    def nvmlInit(self) -> None: ...  # noqa: N802 (NVML's own names)
    def nvmlShutdown(self) -> None: ...  # noqa: N802
    def nvmlDeviceGetCount(self) -> int: ...  # noqa: N802
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...  # noqa: N802
    def nvmlDeviceGetUUID(self, handle: Any) -> str | bytes: ...  # noqa: N802
    def nvmlDeviceGetName(self, handle: Any) -> str | bytes: ...  # noqa: N802
    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any: ...  # noqa: N802
    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any: ...  # noqa: N802
    def nvmlDeviceGetMigMode(self, handle: Any) -> Any: ...  # noqa: N802


class MigMode(enum.Enum):
    ENABLED = "enabled"
    """Split into MIG instances: the whole device cannot be handed to a process."""
    DISABLED = "disabled"
    UNSUPPORTED = "unsupported"
    """The device has no MIG (anything before Ampere, consumer cards)."""


class GpuDevice(msgspec.Struct, frozen=True, kw_only=True):
    """One GPU as NVML reports it."""

    index: int
    """NVML's index (PCI bus order; CUDA may number devices differently, hence `uuid`)."""
    uuid: str
    """`GPU-...`: what `CUDA_VISIBLE_DEVICES` is set to, which no device ordering can confuse."""
    name: str
    """Product name, e.g. `NVIDIA H100 80GB HBM3`."""
    flavor: str
    """The flavor the device counts as (see `flavor_of`)."""
    memory_total_bytes: int
    memory_used_bytes: int
    utilization_percent: int | None
    """GPU utilisation over NVML's last sample period; None where NVML does not report it."""
    mig: MigMode

    @property
    def is_assignable(self) -> bool:
        """Whether the whole device can be given to a worker (not split into MIG instances)."""
        return self.mig is not MigMode.ENABLED


class Inventory(msgspec.Struct, frozen=True, kw_only=True):
    """The machine's GPUs; empty where there is no NVML, with the reason."""

    devices: tuple[GpuDevice, ...] = ()
    unavailable: str | None = None
    """Why NVML gave no devices (no module, no driver); None when NVML answered."""


def flavor_of(product_name: str) -> str:
    """The flavor a product counts as: its name in lower case, each run of other characters
    than letters and digits made one `-`, a leading `nvidia-` dropped, at most 63 characters.

    `NVIDIA H100 80GB HBM3` -> `h100-80gb-hbm3`; `NVIDIA A100-SXM4-80GB` -> `a100-sxm4-80gb`;
    `Tesla T4` -> `tesla-t4`. It is the node label `nvidia.com/gpu.product` that NVIDIA's GPU
    feature discovery writes, in the form a ResourceFlavor name takes.
    """
    normal = re.sub(r"[^a-z0-9]+", "-", product_name.lower()).strip("-")
    normal = normal.removeprefix("nvidia-") if normal != "nvidia" else normal
    return normal[:_FLAVOR_MAX_LENGTH].rstrip("-") or "gpu"


def load_nvml() -> Nvml | str:
    """The `pynvml` module, or why it cannot be imported."""
    try:
        module: Nvml = importlib.import_module("pynvml")
    except ImportError as exc:
        return f"no NVML binding ({exc}); pip install 'asya[gpu]'"
    return module


def read_inventory(nvml: Nvml | str | None = None) -> Inventory:
    """The GPUs NVML sees; empty, with the reason, where it cannot be used.

    `nvml` is the binding to ask (default: `pynvml`, from `load_nvml`), or why there is none.
    Never raises for a missing or failing NVML: that is a machine without GPUs.
    """
    binding = load_nvml() if nvml is None else nvml
    if isinstance(binding, str):
        return Inventory(unavailable=binding)
    try:
        binding.nvmlInit()
    except binding.NVMLError as exc:
        return Inventory(unavailable=f"NVML did not start: {exc}")
    try:
        return Inventory(devices=tuple(_devices(binding)))
    except binding.NVMLError as exc:
        return Inventory(unavailable=f"NVML failed while listing devices: {exc}")
    finally:
        with contextlib.suppress(binding.NVMLError):  # read already; nothing left to release
            binding.nvmlShutdown()


def _devices(nvml: Nvml) -> list[GpuDevice]:
    devices = []
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        name = _text(nvml.nvmlDeviceGetName(handle))
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        devices.append(
            GpuDevice(
                index=index,
                uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                name=name,
                flavor=flavor_of(name),
                memory_total_bytes=int(memory.total),
                memory_used_bytes=int(memory.used),
                utilization_percent=_utilization(nvml, handle),
                mig=_mig_mode(nvml, handle),
            )
        )
    return devices


def _utilization(nvml: Nvml, handle: Any) -> int | None:
    # Not reported for a MIG-enabled device, nor on some boards: unknown, not a failure.
    try:
        return int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except nvml.NVMLError:
        return None


def _mig_mode(nvml: Nvml, handle: Any) -> MigMode:
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError:  # NotSupported on devices without MIG
        return MigMode.UNSUPPORTED
    return MigMode.ENABLED if current == _MIG_ENABLED else MigMode.DISABLED


def _text(value: str | bytes) -> str:
    # Older bindings return bytes, newer ones str.
    return value.decode() if isinstance(value, bytes) else value
