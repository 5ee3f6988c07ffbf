"""Suite hygiene: a fresh actor registry, an isolated environment, no leaked asyncio tasks."""

from __future__ import annotations

import asyncio
import os

import pytest

from asya.actor import REGISTRY

pytest_plugins = ["tests.fixtures_broker"]


@pytest.fixture(autouse=True)
def fresh_registry():
    """Each test declares its own actors; none leak into the next."""
    saved = list(REGISTRY)
    REGISTRY.clear()
    yield REGISTRY
    REGISTRY.clear()
    for spec in saved:
        REGISTRY.add(spec)


@pytest.fixture(autouse=True)
def isolated_environment(monkeypatch):
    """No ASYA_* variable from the developer's shell reaches a test."""
    for name in list(os.environ):
        if name.startswith("ASYA_") and not name.startswith("ASYA_TEST_"):
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
async def no_leaked_tasks():
    """Fail a test that leaves asyncio tasks running: every task must have an owner."""
    yield
    current = asyncio.current_task()
    leaked = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    for task in leaked:
        task.cancel()
    if leaked:
        await asyncio.gather(*leaked, return_exceptions=True)
        pytest.fail(f"test left {len(leaked)} asyncio task(s) running: {leaked}")
