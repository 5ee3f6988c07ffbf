"""Running `asya` as a user does, and checking what it leaves behind: processes and queues."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

from asya.errors import UnknownActorError
from asya.routing import ERROR_END, HAPPY_END
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
from asya.transport.rabbitmq_namespace import NamespaceQueues

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = ROOT / "examples" / "quickstart"


async def run_asya(*args: str, answer: str = "", timeout_s: float = 180) -> tuple[int, str, str]:
    """`python -m asya.cli ARGS` to its end, `answer` on its stdin: (exit code, stdout, stderr)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "asya.cli",
        *args,
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(answer.encode()), timeout_s)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def start_asya(
    *args: str, stdout: int = subprocess.PIPE, env: dict[str, str] | None = None
) -> asyncio.subprocess.Process:
    """`python -m asya.cli ARGS` in a process group of its own, as a terminal starts it."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "asya.cli",
        *args,
        cwd=ROOT,
        start_new_session=True,
        stdout=stdout,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )


async def read_stderr_until(process: asyncio.subprocess.Process, pattern: str) -> str:
    """What the process printed on stderr up to the first line matching `pattern`."""
    seen = ""
    while not re.search(pattern, seen):
        line = await asyncio.wait_for(process.stderr.readline(), 60)
        assert line, f"stderr ended before {pattern!r}:\n{seen}"
        seen += line.decode()
    return seen


def group_pids(pgid: int) -> set[int]:
    done = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True, check=False)
    return {int(pid) for pid in done.stdout.split()}


def is_alive(pid: int) -> bool:
    """Running or sleeping; a zombie (exited, not yet reaped) is not alive."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat.rpartition(")")[2].split()[0]
    return state not in ("Z", "X")


async def wait_until_gone(pids: set[int], timeout_s: float = 10) -> set[int]:
    """The pids still alive once all have exited or `timeout_s` has passed.

    Waits on a pidfd per process (readable when it exits), so no polling.
    """
    loop = asyncio.get_running_loop()
    fds: list[int] = []
    exits: list[asyncio.Future[None]] = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        exited = loop.create_future()
        loop.add_reader(fd, lambda f=exited: f.done() or f.set_result(None))
        fds.append(fd)
        exits.append(exited)
    try:
        await asyncio.wait_for(asyncio.gather(*exits), timeout_s)
    except TimeoutError:
        pass
    finally:
        for fd in fds:
            loop.remove_reader(fd)
            os.close(fd)
    return {pid for pid in pids if is_alive(pid)}


def namespace_of(stderr: str) -> str:
    match = re.search(r"asya: namespace '([^']+)'", stderr)
    assert match, stderr
    return match.group(1)


async def existing_queues(url: str, names: list[str]) -> list[str]:
    """Those of the queues `names` that exist on the broker, in the order given."""
    async with RabbitMQTransport(url, RabbitMQOptions(connection_name="test-queues")) as opened:
        queues = NamespaceQueues(opened)
        try:
            return [state.name for state in await queues.states(names)]
        finally:
            await queues.aclose()


async def queues_left(url: str, namespace: str, actors: list[str]) -> list[str]:
    """The actors (end actors included) that still have a queue in `namespace`."""
    transport = RabbitMQTransport(url, RabbitMQOptions(namespace=namespace))
    await transport.connect()
    left = []
    try:
        for actor in [*actors, HAPPY_END, ERROR_END]:
            try:
                await transport.depth(actor)
            except UnknownActorError:
                continue
            left.append(actor)
    finally:
        await transport.aclose()
    return left


def pipe_of(size: int) -> tuple[int, int]:
    """A pipe whose buffer holds only `size` bytes (Linux), so a writer blocks early."""
    import fcntl

    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, size)
    return read_fd, write_fd
