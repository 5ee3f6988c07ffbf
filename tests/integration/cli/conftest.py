"""Fixtures for running `asya dev` in each of its modes."""

from __future__ import annotations

import pytest

MODES = ("memory", "broker", "isolate")


@pytest.fixture
def mode_args(request):
    """`asya dev` arguments for the mode a test is parametrized with (`mode`)."""
    mode = request.node.callspec.params["mode"]
    if mode == "memory":
        return []
    url = request.getfixturevalue("amqp_url")
    return ["--broker", url] if mode == "broker" else ["--broker", url, "--isolate"]
