"""`asya.__all__` is the public surface: exactly the names the package exposes."""

from __future__ import annotations

import asya


def test_all_lists_exactly_the_public_names():
    public = {
        name
        for name in vars(asya)
        if not name.startswith("_") and not isinstance(getattr(asya, name), type(asya))
    }

    assert set(asya.__all__) == public


def test_the_names_a_handler_file_needs_are_exported():
    assert {"actor", "Context", "RetryPolicy", "PermanentError", "Client"} <= set(asya.__all__)
