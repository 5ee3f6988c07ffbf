"""Running the docs' commands as a reader would, or, where a command needs a cluster, checking
it against what the charts render and the CRDs define.

Each command runs in a working directory of its own page (`workdir`), which links to this
repository's top-level files, so `examples/...` and `charts/...` resolve and what a command
writes (`values.yaml`, `crs.yaml`) stays there. `asya`, `asya-operator` and `pytest` run as
processes, as typed; `helm install|upgrade|template` renders the chart with real Helm
(helm-python-sdk), with `--reuse-values` over the values the page installed the release
with, and validates every object as a cluster would; `kubectl` commands are
checked against the CRDs and the objects `asya-operator plan` writes (a broker Secret's URLs
against the namespace's identity), `rabbitmqctl` against `asya.broker_identity` (the tenancy
tests run those very commands on the broker); `pip install` against
the extras `pyproject.toml` declares; `scripts/quickstart` by running the command it ends
with, and `scripts/test` by `.ci/run`, which CI runs. A command no checker knows fails.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
import tomllib
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml
from asya_operator.api.crds import all_crds
from asya_operator.api.group import REACTIVATE_ANNOTATION

from asya import broker_identity
from asya.cli import _parser as asya_parser
from asya.gpu import read_inventory
from tests.charts.chart_checks import check_all
from tests.docs.pages import ROOT, Command

LOCAL_BROKER = "amqp://guest:guest@127.0.0.1:5672/"
"""The broker the docs name; a test substitutes the one the suite runs against."""


@dataclass(frozen=True)
class Ran:
    command: Command
    code: int
    stdout: str
    stderr: str


def workdir(path: Path) -> Path:
    """`path`, with a link to each top-level entry of this repository."""
    for entry in ROOT.iterdir():
        if entry.name not in (".git", ".venv") and not (path / entry.name).exists():
            (path / entry.name).symlink_to(entry)
    return path


def has_gpu() -> bool:
    return any(device.is_assignable for device in read_inventory().devices)


def expected_exit(command: Command) -> int:
    if command.exits_only_without_gpu and has_gpu():
        return 0
    return command.exits


def needs_broker(command: Command) -> bool:
    return any(LOCAL_BROKER in arg for arg in command.argv) and "--kubernetes" not in command.argv


def kind_of(command: Command) -> str:
    """Which checker takes the command; KeyError names one none takes."""
    program = command.argv[0]
    if program == "asya" and "--kubernetes" in command.argv:
        return "asya-parse"
    if program in CHECKERS:
        return program
    raise KeyError(f"no test knows how to run {command}")


def exercise(command: Command, cwd: Path, broker_url: str | None) -> Ran:
    """Run or check `command` in `cwd`; returns what it printed. Fails the test when the
    command does not do what the page says (its exit status, or a check of its kind)."""
    argv = [a.replace(LOCAL_BROKER, broker_url) if broker_url else a for a in command.argv]
    ran = CHECKERS[kind_of(command)](command, argv, cwd)
    if command.stdout_to is not None:
        with (cwd / command.stdout_to).open("a" if command.append else "w") as out:
            out.write(ran.stdout)
    assert ran.code == expected_exit(command), (
        f"{command}\nexited {ran.code}, the page says {expected_exit(command)}\n"
        f"stdout: {ran.stdout[-2000:]}\nstderr: {ran.stderr[-2000:]}"
    )
    return ran


def _process(command: Command, argv: list[str], cwd: Path) -> Ran:
    path = os.pathsep.join([str(ROOT), str(ROOT / "sidecar"), str(ROOT / "operator")])
    env = {**os.environ, **command.env, "PYTHONPATH": path}
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    return Ran(command, done.returncode, done.stdout, done.stderr)


def _asya(command: Command, argv: list[str], cwd: Path) -> Ran:
    return _process(command, [sys.executable, "-m", "asya.cli", *argv[1:]], cwd)


def _asya_parse(command: Command, argv: list[str], cwd: Path) -> Ran:
    # Needs a cluster: the options must be the CLI's, with values it takes.
    asya_parser().parse_args(argv[1:])
    return Ran(command, 0, "", "")


def _operator(command: Command, argv: list[str], cwd: Path) -> Ran:
    return _process(command, [sys.executable, "-m", "asya_operator.cli", *argv[1:]], cwd)


def _pytest(command: Command, argv: list[str], cwd: Path) -> Ran:
    pytest = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *argv[1:]]
    return _process(command, pytest, cwd)


def _echo(command: Command, argv: list[str], cwd: Path) -> Ran:
    return Ran(command, 0, " ".join(argv[1:]) + "\n", "")


def _pip(command: Command, argv: list[str], cwd: Path) -> Ran:
    assert argv[1] == "install", command
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for target in argv[2:]:
        if target == "-e":
            continue
        name, _, extras = target.partition("[")
        assert name in (".", "asya"), f"{command}: installs {name}, not asya"
        for extra in filter(None, extras.rstrip("]").split(",")):
            assert extra.strip() in declared["optional-dependencies"], f"{command}: no {extra}"
    return Ran(command, 0, "", "")


def _script(command: Command, argv: list[str], cwd: Path) -> Ran:
    script = ROOT / argv[0]
    assert os.access(script, os.X_OK), f"{script} is not executable"
    if argv[0] == "scripts/test":
        # CI runs it on every change: the CI entry point must end in it.
        assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("exec scripts/test")
        return Ran(command, 0, "", "")
    # scripts/quickstart installs into .venv, then runs one asya command: run that command.
    [last] = [line for line in script.read_text().splitlines() if line.startswith("exec ")]
    runs = shlex.split(last)[1:]
    assert runs[0] == ".venv/bin/asya", last
    runs = [a for a in runs if a != "$@"]  # the script's own arguments
    return _asya(command, ["asya", *runs[1:]], cwd)


def _helm(command: Command, argv: list[str], cwd: Path) -> Ran:
    verb, release, chart, *options = argv[1:]
    assert verb in ("install", "upgrade", "template"), command
    assert (cwd / chart / "Chart.yaml").exists(), f"{command}: no chart at {chart}"
    values: dict[str, Any] = {}
    namespace = "default"
    reuse = False
    flags = iter(options)
    for flag in flags:
        if flag in ("-n", "--namespace"):
            namespace = next(flags)
        elif flag in ("-f", "--values"):
            values = _merge(values, yaml.safe_load((cwd / next(flags)).read_text()))
        elif flag == "--set":
            for assignment in next(flags).split(","):
                path, _, value = assignment.partition("=")
                values = _merge(values, _nested(path.split("."), value))
        elif flag == "--reuse-values":
            reuse = True
        else:
            assert flag == "--create-namespace", f"{command}: {flag}?"
    # Helm keeps a release's values in the cluster; here the page's working directory does.
    kept = cwd / ".helm-releases" / f"{namespace}.{release}.yaml"
    if reuse:
        assert kept.exists(), f"{command}: no release {release} in {namespace} to reuse values of"
        values = _merge(yaml.safe_load(kept.read_text()), values)
    if verb != "template":
        kept.parent.mkdir(exist_ok=True)
        kept.write_text(yaml.safe_dump(values))
    with helm.Chart.load(str(cwd / chart)) as loaded:
        manifests = loaded.render(values, name=release, namespace=namespace)
    objects = [
        obj
        for path, text in sorted(manifests.items())
        if not path.endswith("NOTES.txt")
        for obj in yaml.safe_load_all(text)
        if obj
    ]
    check_all(objects)
    return Ran(command, 0, yaml.safe_dump_all(objects, sort_keys=False), "")


def _nested(path: list[str], value: str) -> dict[str, Any]:
    return {path[0]: _nested(path[1:], value) if path[1:] else value}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        both = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = _merge(merged[key], value) if both else value
    return merged


@functools.cache
def _crd_names() -> dict[str, str]:
    """Every name kubectl takes for our kinds (plural, singular, short, and the plural or
    singular with the group: `resourceflavors.asya.sh`), to the kind."""
    names = {}
    for crd in all_crds():
        spec, group = crd["spec"]["names"], crd["spec"]["group"]
        for name in [spec["plural"], spec["singular"], *spec.get("shortNames", [])]:
            names[name] = spec["kind"]
        for name in [spec["plural"], spec["singular"]]:
            names[f"{name}.{group}"] = spec["kind"]
    return names


@functools.cache
def _planned_secret_refs() -> set[tuple[str, str]]:
    """(Secret, key) pairs the objects `asya-operator plan` writes read."""
    done = subprocess.run(
        [sys.executable, "-m", "asya_operator.cli", "plan", "examples/operator/quickstart.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'sidecar'}:{ROOT / 'operator'}"},
    )
    text = done.stdout
    refs = re.findall(r"secretKeyRef:\s+name: (\S+)\s+key: (\S+)", text)
    refs += re.findall(r"- parameter: \S+\s+name: (\S+)\s+key: (\S+)", text)
    return set(refs)


def _kubectl(command: Command, argv: list[str], cwd: Path) -> Ran:
    verb, *rest = argv[1:]
    words = [
        w
        for i, w in enumerate(rest)
        if not w.startswith("-") and (i == 0 or rest[i - 1] not in ("-n", "--namespace", "-f"))
    ]
    if verb in ("apply", "delete"):
        [folder] = [rest[i + 1] for i, w in enumerate(rest) if w == "-f"]
        shipped = {
            yaml.safe_load(p.read_text())["spec"]["names"]["kind"]
            for p in (cwd / folder).glob("*.yaml")
        }
        assert shipped == {crd["spec"]["names"]["kind"] for crd in all_crds()}, command
    elif verb == "create":
        assert words[:2] == ["secret", "generic"], command
        name = words[2]
        keys = {w.split("=", 1)[1].split("=", 1)[0] for w in rest if w.startswith("--from-literal")}
        assert {(name, key) for key in keys} == _planned_secret_refs(), (
            f"{command}: the operator's objects read {_planned_secret_refs()}"
        )
        [namespace] = [rest[i + 1] for i, w in enumerate(rest) if w in ("-n", "--namespace")]
        _check_identity_urls(command, namespace, rest)
    elif verb in ("get", "describe", "annotate"):
        assert words[0] in _crd_names(), f"{command}: kubectl knows no {words[0]} of ours"
        if verb == "annotate":
            key = words[2].split("=", 1)[0]
            assert key == REACTIVATE_ANNOTATION, f"{command}: the operator reads {key}?"
            assert _crd_names()[words[0]] == "ActorGroup", command
    else:
        raise AssertionError(f"no check for {command}")
    return Ran(command, 0, "", "")


def _check_identity_urls(command: Command, namespace: str, args: list[str]) -> None:
    """A broker Secret's URLs name the namespace's own identity (`asya.broker_identity`):
    its actors' user and KEDA's, each on the namespace's vhost."""
    urls = dict(a.split("=", 1)[1].split("=", 1) for a in args if a.startswith("--from-literal"))
    expected = {
        "amqp-url": (broker_identity.actors_user(namespace), broker_identity.vhost(namespace)),
        "management-url": (broker_identity.keda_user(namespace), broker_identity.vhost(namespace)),
    }
    for key, url in urls.items():
        parts = urllib.parse.urlsplit(url)
        found = (parts.username, urllib.parse.unquote(parts.path.lstrip("/")))
        assert found == expected[key], f"{command}: {key} is {found}, the identity {expected[key]}"


def _rabbitmqctl(command: Command, argv: list[str], cwd: Path) -> Ran:
    """A command of a namespace's broker identity, as `asya.broker_identity` has it: the
    namespace's vhost, its two users, their permissions and tags (the tenancy tests run these
    very commands against the real broker)."""
    verb, *args = argv[1:]
    if verb == "add_vhost":
        [name] = args
        assert name.startswith("asya."), command
        assert name == broker_identity.vhost(name.removeprefix("asya.")), command
    elif verb == "add_user":
        user, _password = args
        assert _namespace_of_user(user), f"{command}: {user} is no namespace's user"
    elif verb == "set_permissions":
        assert args[0] == "-p", command
        vhost, user, *permissions = args[1:]
        namespace, keda = _namespace_of_user(user)
        assert vhost == broker_identity.vhost(namespace), f"{command}: not {user}'s own vhost"
        want = broker_identity.KEDA_PERMISSIONS if keda else broker_identity.ACTORS_PERMISSIONS
        assert tuple(permissions) == want, f"{command}: {user} gets {want}"
    elif verb == "set_user_tags":
        user, *tags = args
        assert _namespace_of_user(user), command
        assert tuple(tags) == broker_identity.USER_TAGS, command
    else:
        raise AssertionError(f"no check for {command}")
    return Ran(command, 0, "", "")


def _namespace_of_user(user: str) -> tuple[str, bool]:
    """The namespace a user of `asya.broker_identity` is for, and whether it is KEDA's."""
    namespace = user.removeprefix("asya.").removesuffix(".keda")
    keda = user == broker_identity.keda_user(namespace)
    assert keda or user == broker_identity.actors_user(namespace), f"{user}: no identity's user"
    return namespace, keda


Checker = Callable[[Command, list[str], Path], Ran]
CHECKERS: dict[str, Checker] = {
    "asya": _asya,
    "asya-parse": _asya_parse,
    "asya-operator": _operator,
    "pytest": _pytest,
    "echo": _echo,
    "pip": _pip,
    "scripts/quickstart": _script,
    "scripts/test": _script,
    "helm": _helm,
    "kubectl": _kubectl,
    "rabbitmqctl": _rabbitmqctl,
}
