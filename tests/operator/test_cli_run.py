"""`asya-operator run`: the namespaces it watches reach kopf and the cluster client alike."""

from __future__ import annotations

from typing import Any

import pytest
from asya_operator import cli


@pytest.fixture
def started(monkeypatch) -> dict[str, Any]:
    """What `run` hands kopf, and the namespaces the operator was built with; kopf not run."""
    seen: dict[str, Any] = {}
    built = cli.build

    def build(config, **options):
        seen["build"] = options
        return built(config, **options)

    monkeypatch.setattr(cli, "build", build)
    monkeypatch.setattr(cli.kopf, "run", lambda **options: seen.setdefault("kopf", options))
    # Not this test's business, and it would configure the process's logging for the tests
    # that follow.
    monkeypatch.setattr(cli, "configure_logging", lambda *_, **__: None)
    monkeypatch.setenv("ASYA_OPERATOR_SIDECAR_IMAGE", "registry.example.com/asya-sidecar:1")
    return seen


def test_several_namespaces_are_watched_each_once_in_the_order_given(started):
    code = cli.main(
        ["run", "--namespace", "team-a", "--namespace", "team-b", "--namespace", "team-a"]
    )

    assert code == 0
    assert started["build"]["namespaces"] == ["team-a", "team-b"]
    assert started["kopf"]["namespaces"] == ["team-a", "team-b"]
    assert started["kopf"]["clusterwide"] is False


def test_no_namespace_watches_every_one(started):
    code = cli.main(["run"])

    assert code == 0
    assert started["build"]["namespaces"] == []
    assert started["kopf"]["clusterwide"] is True


def test_a_namespace_pattern_is_refused_naming_it(started, capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main(["run", "--namespace", "team-*"])

    assert stopped.value.code == 2
    assert "'team-*' is not a namespace name" in capsys.readouterr().err
    assert "kopf" not in started
