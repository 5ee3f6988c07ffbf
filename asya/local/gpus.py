"""GPU assignment for local runs: which worker of a GPU actor gets which of this machine's GPUs.

A GPU actor (`@actor(gpus=N)`) runs each worker in processes of its own, started with
`CUDA_VISIBLE_DEVICES` set to the UUIDs of N devices that no other worker holds: the variable is
read once, when a process first touches CUDA, so workers sharing one process could not be given
different devices. A worker's devices go back only once its processes have exited, so a device
is never in two workers' hands. Where fewer than N are free, the worker waits (one log line says
so, and one when it gets its devices), or, with `cpu_fallback=True`, starts at once on CPU, with
`CUDA_VISIBLE_DEVICES` empty so that it cannot touch a GPU. An actor that needs more devices
than the machine has at all could wait for ever: that stops the run at start (`asya serve`,
`asya dev --strict-gpus`), unless it may run on CPU — it declares `cpu_fallback=True`, or the
run allows it (`GpuMode.ASSIGN_OR_CPU`, `asya dev` on a laptop). Such an actor's workers all
run on CPU, silently: the caller says so once, at the start (`GpuAssigner.on_cpu`), not a log
line per worker. MIG-enabled devices are listed by `asya gpus` but never handed out (a process
would need a MIG instance's UUID, not the device's).

`GpuAssigner` decides (no I/O); `GpuWorkers` adds how a worker's processes are started, and
`machine_gpus` builds both from the machine's inventory. Used by `asya.local.mesh` (in-process
workers; a GPU actor's worker is a `Consumer` in the runner calling a `ProcessInvoker`) and
`asya.local.isolate` (the runtime process gets the variable).
"""

from __future__ import annotations

import enum
import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from asya.actor import ActorSpec
from asya.envelope import Envelope
from asya.errors import ActorDefinitionError
from asya.gpu import GpuDevice, Inventory, read_inventory
from asya.outcome import Outcome
from asya.runtime.workers import ProcessInvoker

log = logging.getLogger(__name__)

CUDA_VISIBLE_DEVICES: Final = "CUDA_VISIBLE_DEVICES"


class GpuMode(enum.Enum):
    """How a local run treats GPU actors; chosen once, at the mesh's start."""

    ASSIGN = "assign"
    """Each worker in its own processes, with devices from the machine's inventory; an actor
    that needs more than the machine has stops the run, unless it declares `cpu_fallback`."""
    ASSIGN_OR_CPU = "assign-or-cpu"
    """As ASSIGN, but an actor that needs more than the machine has runs on CPU, every worker
    in its own processes with every GPU hidden (`asya dev` without --strict-gpus)."""
    IN_PROCESS = "in-process"
    """Like any other actor, in the runner's process, with no devices assigned (tests)."""


@dataclass(frozen=True)
class Assignment:
    """What one worker of a GPU actor was given: devices, or none (on CPU)."""

    actor: str
    worker: int
    devices: tuple[GpuDevice, ...]

    @property
    def on_cpu(self) -> bool:
        return not self.devices

    def environment(self) -> dict[str, str]:
        """`CUDA_VISIBLE_DEVICES` for the worker's processes; empty hides every GPU."""
        return {CUDA_VISIBLE_DEVICES: ",".join(d.uuid for d in self.devices)}


class GpuAssigner:
    """Hands devices to workers, never one device to two workers; see the module docstring."""

    def __init__(self, inventory: Inventory) -> None:
        self._inventory = inventory
        self._free = [d for d in inventory.devices if d.is_assignable]
        self._total = len(self._free)
        self._held: dict[str, Assignment] = {}
        self._waiting: set[str] = set()
        self._on_cpu: dict[str, None] = {}

    @property
    def total(self) -> int:
        """Devices that can be handed out at all."""
        return self._total

    def free(self) -> tuple[GpuDevice, ...]:
        return tuple(self._free)

    @property
    def on_cpu(self) -> tuple[str, ...]:
        """The actors `check` put on CPU for the whole run, in the order checked."""
        return tuple(self._on_cpu)

    def check(self, specs: Iterable[ActorSpec], *, use_cpu: bool = False) -> None:
        """Decide, before anything starts, for each GPU actor that could only ever wait (it
        needs more devices per worker than the machine has): all its workers run on CPU if it
        declares `cpu_fallback=True` or `use_cpu` allows it (see `on_cpu`); else the run stops.

        Raises:
            ActorDefinitionError: an actor needs more devices per worker than the machine has
                and may not run on CPU.
        """
        for spec in specs:
            needs = spec.resources.gpus
            if needs <= self._total:
                continue
            if spec.cpu_fallback or use_cpu:
                self._on_cpu[spec.name] = None
            else:
                raise ActorDefinitionError(
                    f"actor '{spec.name}' needs {needs} GPU(s) per worker and this machine has"
                    f" {self.describe_total()}; declare @actor(..., cpu_fallback=True) to run"
                    " it on CPU where no GPU is free (`asya gpus` lists what NVML sees)",
                    actor=spec.name,
                )

    def assign(self, spec: ActorSpec, worker: int) -> Assignment | None:
        """Devices for worker `worker` of `spec`; on CPU if none are free and the actor allows
        it; None if it must wait (the first time, a log line says so)."""
        if spec.name in self._on_cpu:  # said once, at the start, by whoever ran `check`
            on_cpu = Assignment(spec.name, worker, ())
            self._held[_key(on_cpu)] = on_cpu
            return on_cpu
        needs = spec.resources.gpus
        if len(self._free) < needs and not spec.cpu_fallback:
            if spec.name not in self._waiting:
                self._waiting.add(spec.name)
                log.warning("GPU actor waits: not enough GPUs free", extra=self._fields(spec, ()))
            return None
        taken: tuple[GpuDevice, ...] = ()
        if len(self._free) >= needs:
            taken, self._free = tuple(self._free[:needs]), self._free[needs:]
        assignment = Assignment(spec.name, worker, taken)
        self._held[_key(assignment)] = assignment
        if assignment.on_cpu:
            log.warning("no GPU free: worker runs on CPU", extra=self._fields(spec, taken))
        elif spec.name in self._waiting:
            self._waiting.discard(spec.name)
            log.warning("GPU actor no longer waits", extra=self._fields(spec, taken))
        return assignment

    def release(self, assignment: Assignment) -> None:
        """Give back `assignment`'s devices; call once its worker's processes have exited."""
        if self._held.pop(_key(assignment), None) is None:
            return
        self._free.extend(assignment.devices)
        self._free.sort(key=lambda d: d.index)

    def _fields(self, spec: ActorSpec, taken: Sequence[GpuDevice]) -> dict[str, object]:
        holders = sorted(
            f"{a.actor}/{a.worker}:{','.join(str(d.index) for d in a.devices)}"
            for a in self._held.values()
            if a.devices
        )
        return {
            "actor": spec.name,
            "needs": spec.resources.gpus,
            "free": len(self._free),
            "total": self._total,
            "gpus": ",".join(str(d.index) for d in taken) or "none",
            "held_by": " ".join(holders) or "none",
        }

    def describe_total(self) -> str:
        """How many devices can be handed out, for messages: `2`, `none (no driver)`."""
        devices = self._inventory.devices
        if not devices:
            why = self._inventory.unavailable
            return "none" + (f" ({why})" if why else "")
        mig = len(devices) - self._total
        return f"{self._total}" + (f" ({mig} more split into MIG instances)" if mig else "")


def _key(assignment: Assignment) -> str:
    return f"{assignment.actor}/{assignment.worker}"


class StartableInvoker(Protocol):
    async def start(self) -> None: ...

    async def invoke(self, envelopes: Sequence[Envelope]) -> list[Outcome]: ...

    def drain(self) -> None: ...

    async def aclose(self) -> None: ...


InvokerFactory = Callable[[ActorSpec, Assignment], StartableInvoker]
"""Builds the invoker of one GPU worker: its own processes, with the assignment's devices."""


@dataclass(frozen=True)
class GpuWorkers:
    """What a mesh needs to run GPU actors: the assigner, and how a worker's processes start."""

    assigner: GpuAssigner
    invoker: InvokerFactory


def process_invokers(
    env: Mapping[str, str], *, depth: int = 1, kill_grace_s: float = 2.0
) -> InvokerFactory:
    """Invokers running the handler in runtime worker processes (`ProcessInvoker`), each with
    `env` plus the assignment's `CUDA_VISIBLE_DEVICES` and the actor's code on PYTHONPATH;
    `depth` calls queued at each worker behind the one it runs."""

    def build(spec: ActorSpec, assignment: Assignment) -> StartableInvoker:
        return worker_processes(
            spec, {**env, **assignment.environment()}, depth=depth, kill_grace_s=kill_grace_s
        )

    return build


def worker_processes(
    spec: ActorSpec, env: Mapping[str, str], *, depth: int = 1, kill_grace_s: float = 2.0
) -> ProcessInvoker:
    """An invoker running `spec`'s handler in worker processes with `env` and the actor's
    code on PYTHONPATH: a call past its timeout is killed with its worker."""
    path = os.pathsep.join(p for p in (code_root(spec), env.get("PYTHONPATH")) if p)
    return ProcessInvoker(
        spec.ref, env={**env, "PYTHONPATH": path}, depth=depth, kill_grace_s=kill_grace_s
    )


def code_root(spec: ActorSpec) -> str | None:
    """The folder from which the actor's module imports under its name, for another process's
    PYTHONPATH: `/x` for module `a.b` in `/x/a/b.py`; None for a module with no file."""
    module = sys.modules.get(spec.module)
    file = getattr(module, "__file__", None)
    if file is None:
        return None
    root = Path(file)
    for _ in spec.module.split("."):
        root = root.parent
    if Path(file).name == "__init__.py":
        root = root.parent
    return str(root)


def machine_gpus(
    specs: Sequence[ActorSpec],
    mode: GpuMode,
    *,
    env: Mapping[str, str] | None = None,
    depth: int = 1,
    inventory: Callable[[], Inventory] = read_inventory,
) -> GpuWorkers | None:
    """The GPU workers of a run on this machine; None where no actor needs a GPU or in
    `IN_PROCESS` mode. `env` is the workers' environment (default: this process's); `depth`,
    the calls queued at each worker behind the one it runs. The actors that run on CPU for
    want of GPUs are `assigner.on_cpu`, for the caller to say so once.

    Raises:
        ActorDefinitionError: a GPU actor could only ever wait (see `GpuAssigner.check`).
    """
    if mode is GpuMode.IN_PROCESS or not any(s.resources.gpus for s in specs):
        return None
    assigner = GpuAssigner(inventory())
    assigner.check(specs, use_cpu=mode is GpuMode.ASSIGN_OR_CPU)
    # The runner's own environment, as the runtime's workers would inherit it.
    workers_env = dict(os.environ) if env is None else env
    return GpuWorkers(assigner, process_invokers(workers_env, depth=depth))
