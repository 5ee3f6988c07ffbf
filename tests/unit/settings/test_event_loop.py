"""ASYA_EVENT_LOOP: uvloop when installed, asyncio on request, a clear error when missing."""

from __future__ import annotations

import asyncio
import sys

import pytest

from asya import event_loop
from asya.errors import SettingsError


async def loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_auto_runs_on_uvloop_when_it_is_installed():
    assert event_loop.run(loop_module(), "auto").startswith("uvloop")


def test_asyncio_is_chosen_on_request():
    assert event_loop.run(loop_module(), "asyncio").startswith("asyncio")


def test_auto_falls_back_to_asyncio_without_uvloop(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)

    assert event_loop.run(loop_module(), "auto").startswith("asyncio")


def test_requiring_a_missing_uvloop_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)

    with pytest.raises(SettingsError, match="pip install uvloop"):
        event_loop.loop_factory("uvloop")
