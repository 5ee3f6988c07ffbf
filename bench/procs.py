"""The contenders' processes: start them, stop every one of them, and read their CPU and memory.

Each process starts in a session of its own, so stopping it (SIGTERM to its process group, then
SIGKILL to whatever is left after the grace period) also stops the children it forked: the
runtime's workers, Dramatiq's and Celery's worker processes. Its stdout and stderr go to a log
file, shown when a contender fails to start or loses envelopes.

CPU and memory come from /proc (Linux): utime + stime of each process and of its descendants,
by role (a process's children count under the role's `child_role` when it has one, so the
runtime's supervisor and its worker are told apart), and VmHWM, the kernel's own record of a
process's peak resident set, so no sampling can miss the peak. The broker is found by name
(`beam.smp`, RabbitMQ's Erlang VM) among this machine's processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Launch:
    """One process to start for a contender."""

    role: str
    argv: Sequence[str]
    env: Mapping[str, str]
    child_role: str | None = None
    """The role its children's CPU and memory count under (None: its own)."""
    label: str = ""
    """Distinguishes processes of one role in log file names (`hop-0`)."""


@dataclass
class Started:
    launch: Launch
    process: subprocess.Popen[bytes]
    log: Path


@dataclass(frozen=True)
class Usage:
    """CPU seconds by role, and the largest peak RSS among each role's processes (MiB)."""

    cpu_s: dict[str, float] = field(default_factory=dict)
    peak_rss_mib: dict[str, float] = field(default_factory=dict)


class ProcessGroup:
    """A contender's processes; `stop` leaves none of them, or of their children, behind."""

    def __init__(self, logs: Path) -> None:
        self._logs = logs
        self.started: list[Started] = []

    def start(self, launch: Launch) -> Started:
        name = "-".join(p for p in (launch.role, launch.label, str(len(self.started))) if p)
        log = self._logs / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                list(launch.argv),
                env=dict(launch.env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started = Started(launch, process, log)
        self.started.append(started)
        return started

    def exited(self) -> list[Started]:
        """Processes that have already exited (a contender that died while starting)."""
        return [s for s in self.started if s.process.poll() is not None]

    async def stop(self, grace_s: float = 15.0) -> list[str]:
        """SIGTERM every process group, SIGKILL what is left after `grace_s`; returns the
        processes that needed SIGKILL (a clean contender needs none)."""
        for s in self.started:
            _signal_group(s.process.pid, signal.SIGTERM)
        killed = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        for s in self.started:
            try:
                await asyncio.to_thread(s.process.wait, max(0.0, deadline - loop.time()))
            except subprocess.TimeoutExpired:
                killed.append(f"{s.launch.role} (pid {s.process.pid})")
            # Children of a process that exited on SIGTERM may outlive it: kill the group.
            _signal_group(s.process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(s.process.wait, 5)
        return killed

    def tails(self, lines: int = 15) -> str:
        """The last lines of each process's log, for a failure message."""
        parts = []
        for s in self.started:
            text = s.log.read_text(errors="replace").splitlines()[-lines:]
            code = s.process.poll()
            state = "running" if code is None else f"exit {code}"
            parts.append(f"--- {s.launch.role} {s.launch.label} ({state}): {s.log}")
            parts.extend(text)
        return "\n".join(parts)

    def usage(self) -> Usage:
        """CPU seconds so far and peak RSS, by role, over every process and its descendants."""
        children = _children_by_parent()
        cpu: dict[str, float] = {}
        rss: dict[str, float] = {}
        for s in self.started:
            pid = s.process.pid
            own = [pid]
            descendants = _descendants(pid, children)
            child_role = s.launch.child_role or s.launch.role
            for role, pids in ((s.launch.role, own), (child_role, descendants)):
                for p in pids:
                    cpu[role] = cpu.get(role, 0.0) + (cpu_seconds(p) or 0.0)
                    peak = peak_rss_mib(p)
                    if peak is not None:
                        rss[role] = max(rss.get(role, 0.0), peak)
                if pids:
                    cpu.setdefault(role, 0.0)
        return Usage(cpu_s=cpu, peak_rss_mib=rss)


def cpu_between(before: Usage, after: Usage) -> dict[str, float]:
    """CPU seconds spent by each role between two readings."""
    return {
        role: round(spent - before.cpu_s.get(role, 0.0), 3) for role, spent in after.cpu_s.items()
    }


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of `pid`, plus those of children it has waited for; None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces: the fields after it follow its last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return (utime + stime + cutime + cstime) * _TICK_S


def peak_rss_mib(pid: int) -> float | None:
    """VmHWM of `pid` in MiB; None if it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


def find_broker_pid() -> int | None:
    """The pid of RabbitMQ's Erlang VM on this machine, if one runs here."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "comm").read_text().strip() == "beam.smp":
                    return int(entry.name)
    return None


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    return children


def _descendants(pid: int, children: Mapping[int, list[int]]) -> list[int]:
    found: list[int] = []
    stack = list(children.get(pid, []))
    while stack:
        child = stack.pop()
        found.append(child)
        stack.extend(children.get(child, []))
    return found


def _signal_group(pid: int, signum: signal.Signals) -> None:
    # The group's id is the pid of the process started in it (start_new_session).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)
