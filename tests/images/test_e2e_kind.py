"""scripts/e2e-kind.sh: it parses, explains itself anywhere, and installs what the charts take.

The script itself needs Docker, kind, kubectl and helm and runs only by hand; what can be
checked here is checked: its syntax, `--help` and the missing-tool message on a machine with
none of the tools, and that the values it passes to the two charts (its `--set` lines, the
quickstart's `asya render` output) render the objects it relies on with the charts as they are.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from asya_operator.config import OperatorConfig

from tests.images.dockerfiles import REPO, parse

SCRIPT = REPO / "scripts" / "e2e-kind.sh"
TOOLS = ("docker", "kind", "kubectl", "helm")

# What the script's variables hold, for reading its --set lines: its images without the tag.
SCRIPT_VALUES = {
    "OPERATOR_IMAGE": "asya.local/asya-operator",
    "SIDECAR_IMAGE": "asya.local/asya-sidecar",
    "TAG": "e2e",
    "COOLDOWN_S": "30",
    "MAX_REPLICAS": "3",
}
_SHELL_VARIABLE = re.compile(r"\$\{?([A-Z_]+)(?:%[^}]*)?\}?")


def _bash() -> str:
    found = shutil.which("bash")
    assert found is not None
    return found


def _run_script(*args: str, path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_bash(), str(SCRIPT), *args],
        env={"PATH": path},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def _set_values(prefix: str) -> dict[str, Any]:
    """The script's `--set "a.b=c,..."` values for keys under `prefix`, as a values dict."""
    values: dict[str, Any] = {}
    text = SCRIPT.read_text(encoding="utf-8")
    for argument in re.findall(r'--set "([^"]+)"', text):
        for assignment in argument.split(","):
            key, _, raw = assignment.partition("=")
            if not key.startswith(prefix):
                continue
            value = _SHELL_VARIABLE.sub(lambda m: SCRIPT_VALUES[m[1]], raw)
            *parents, leaf = key.split(".")
            node = values
            for parent in parents:
                node = node.setdefault(parent, {})
            node[leaf] = int(value) if value.isdigit() else value
    return values


def _script_variable(name: str) -> str:
    match = re.search(rf"^{name}=(\S+)$", SCRIPT.read_text(encoding="utf-8"), re.MULTILINE)
    assert match is not None, f"{name}= not found in the script"
    return match[1]


def _render(chart: str, values: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    with helm.Chart.load(str(REPO / "charts" / chart)) as loaded:
        manifests = loaded.render(values, name=chart.removeprefix("asya-"), namespace=namespace)
    return [
        doc
        for path, text in sorted(manifests.items())
        if not path.endswith("NOTES.txt")
        for doc in yaml.safe_load_all(text)
        if doc
    ]


def test_script_is_valid_bash():
    result = subprocess.run(
        [_bash(), "-n", str(SCRIPT)], capture_output=True, text=True, timeout=30, check=False
    )

    assert result.returncode == 0, result.stderr


def test_help_works_on_a_machine_without_docker_or_any_other_tool(tmp_path):
    result = _run_script("--help", path=str(tmp_path))

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: scripts/e2e-kind.sh")
    assert "KEEP_CLUSTER" in result.stdout
    assert "E2E_CLUSTER" in result.stdout


def test_without_the_tools_it_names_each_missing_one_and_exits_2(tmp_path):
    result = _run_script(path=str(tmp_path))

    assert result.returncode == 2
    first_line = result.stderr.splitlines()[0]
    assert first_line.startswith("e2e-kind: missing:")
    assert set(TOOLS) <= set(first_line.split())


def test_an_unknown_argument_is_a_usage_error(tmp_path):
    result = _run_script("--cluster", path=str(tmp_path))

    assert result.returncode == 2
    assert "unknown argument --cluster" in result.stderr


def test_operator_chart_runs_the_images_the_script_builds():
    values = _set_values("image.") | _set_values("sidecar.")

    objects = _render("asya-operator", values, namespace="asya-system")

    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {var["name"]: var.get("value") for var in container.get("env", [])}
    entrypoint = parse(REPO / "images" / "operator" / "Dockerfile").final.last("ENTRYPOINT")
    assert entrypoint is not None
    assert container["image"] == "asya.local/asya-operator:e2e"
    assert env["ASYA_OPERATOR_SIDECAR_IMAGE"] == "asya.local/asya-sidecar:e2e"
    # No `command`: the image's ENTRYPOINT runs, with the chart's args after it.
    assert "command" not in container
    assert [*(entrypoint.exec_form() or []), *container["args"]][:2] == ["asya-operator", "run"]
    assert pod["securityContext"]["runAsUser"] == OperatorConfig().run_as_user


def test_quickstart_values_give_actors_the_image_can_load_and_a_short_cooldown():
    app = _script_variable("APP")
    image = "asya.local/asya-quickstart:e2e"
    rendered = subprocess.run(
        [sys.executable, "-m", "asya.cli", "render", app, "--image", image],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    values = yaml.safe_load(rendered.stdout) | _set_values("actorDefaults.")

    objects = _render("asya-pipeline", values, namespace="quickstart")

    actors = [o for o in objects if o["kind"] == "AsyncActor"]
    assert len(actors) == 5
    for actor in actors:
        spec = actor["spec"]
        module = spec["handler"].partition(":")[0]
        # The quickstart image puts the package at /app/examples/quickstart, /app on PYTHONPATH.
        assert module.startswith("examples.quickstart."), spec["handler"]
        assert (REPO / Path(*module.split("."))).with_suffix(".py").is_file()
        assert spec["image"] == image
        assert spec["scaling"]["cooldownPeriod"] == 30
        assert spec["scaling"]["maxReplicas"] == 3


@pytest.mark.parametrize("path", ["scripts/e2e/rabbitmq.yaml"])
def test_rabbitmq_for_the_e2e_has_the_management_port_keda_reads(path):
    documents = list(yaml.safe_load_all((REPO / path).read_text(encoding="utf-8")))

    (service,) = [d for d in documents if d["kind"] == "Service"]
    (deployment,) = [d for d in documents if d["kind"] == "Deployment"]
    ports = {p["port"] for p in service["spec"]["ports"]}
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert ports == {5672, 15672}
    assert container["image"].endswith("-management")
