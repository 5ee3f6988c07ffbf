"""What a result depends on besides the code measured: the machine, the versions, the broker."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import subprocess
from typing import Any

import aio_pika

from bench.contenders.base import REPO

PACKAGES = (
    "asya",
    "msgspec",
    "aio-pika",
    "aiormq",
    "uvloop",
    "dramatiq",
    "pika",
    "celery",
    "kombu",
    "amqp",
)


def versions() -> dict[str, str | None]:
    """Installed version of each package that takes part (None: not installed)."""
    found: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def commit() -> dict[str, Any]:
    """The checkout's commit, and whether it had uncommitted changes."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
            )
        except (OSError, subprocess.CalledProcessError):
            return None
        return done.stdout.strip()

    changes = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": None if changes is None else bool(changes)}


async def broker_version(url: str) -> str:
    connection = await aio_pika.connect(url)
    async with connection:
        underlay = connection.transport
        properties = underlay.connection.server_properties if underlay is not None else {}
        version = properties.get("version", b"unknown")
        return version.decode() if isinstance(version, bytes) else str(version)


async def describe(url: str) -> dict[str, Any]:
    return {
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "asya": commit(),
        "versions": versions(),
        "broker": {"version": await broker_version(url)},
    }
