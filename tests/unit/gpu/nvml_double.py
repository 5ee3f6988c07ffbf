"""An NVML test double: the `asya.gpu.Nvml` protocol over a list of made-up devices."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from asya.gpu import GpuDevice, MigMode


class FakeNVMLError(Exception):
    pass


@dataclass
class FakeDevice:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-0"
    total: int = 80 * 1024**3
    used: int = 1024**3
    utilization: int | None = 7
    mig: int | None = 0
    """Current MIG mode (1 enabled, 0 disabled); None: not supported (raises, as NVML does)."""


@dataclass
class FakeNvml:
    devices: list[FakeDevice] = field(default_factory=list)
    init_error: str | None = None
    count_error: str | None = None
    names_as_bytes: bool = False
    started: int = 0
    shut_down: int = 0
    NVMLError: type[Exception] = FakeNVMLError

    def nvmlInit(self) -> None:  # noqa: N802
        if self.init_error is not None:
            raise FakeNVMLError(self.init_error)
        self.started += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shut_down += 1

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        if self.count_error is not None:
            raise FakeNVMLError(self.count_error)
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeDevice:  # noqa: N802
        return self.devices[index]

    def nvmlDeviceGetUUID(self, handle: FakeDevice) -> str | bytes:  # noqa: N802
        return handle.uuid.encode() if self.names_as_bytes else handle.uuid

    def nvmlDeviceGetName(self, handle: FakeDevice) -> str | bytes:  # noqa: N802
        return handle.name.encode() if self.names_as_bytes else handle.name

    def nvmlDeviceGetMemoryInfo(self, handle: FakeDevice) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(
            total=handle.total, used=handle.used, free=handle.total - handle.used
        )

    def nvmlDeviceGetUtilizationRates(self, handle: FakeDevice) -> SimpleNamespace:  # noqa: N802
        if handle.utilization is None:
            raise FakeNVMLError("Not Supported")
        return SimpleNamespace(gpu=handle.utilization, memory=0)

    def nvmlDeviceGetMigMode(self, handle: FakeDevice) -> list[int]:  # noqa: N802
        if handle.mig is None:
            raise FakeNVMLError("Not Supported")
        return [handle.mig, handle.mig]


def gpu(index: int, *, mig: MigMode = MigMode.UNSUPPORTED, name: str = "NVIDIA L4") -> GpuDevice:
    """An inventory entry, as `read_inventory` would make it."""
    return GpuDevice(
        index=index,
        uuid=f"GPU-{index}",
        name=name,
        flavor="l4",
        memory_total_bytes=24 * 1024**3,
        memory_used_bytes=0,
        utilization_percent=0,
        mig=mig,
    )
