"""A small Dockerfile reader for the image checks: stages, instructions, build-arg defaults.

Enough of the Dockerfile syntax for the project's own files: continuation lines, comments,
global `ARG` defaults substituted into `FROM` (`${NAME}`, `$NAME`, `${NAME:-default}`), stages
named with `AS`, exec-form (JSON) `ENTRYPOINT`/`CMD`, flags on `COPY`. It reads, it never
builds: there is no Docker engine where the tests run.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_VARIABLE = re.compile(
    r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}|"
    r"(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


@dataclass(frozen=True)
class Instruction:
    keyword: str
    """Upper case: FROM, RUN, COPY, ..."""
    args: str
    """Everything after the keyword, continuation lines joined."""
    line: int
    """1-based line the instruction starts on."""

    def exec_form(self) -> list[str] | None:
        """The JSON array of an exec-form ENTRYPOINT/CMD/SHELL; None for the shell form."""
        text = self.args.strip()
        if not text.startswith("["):
            return None
        value = json.loads(text)
        assert isinstance(value, list)
        return [str(item) for item in value]

    def flags_and_words(self) -> tuple[dict[str, str], list[str]]:
        """`--flag=value` options first, then the other words (COPY's sources and target)."""
        flags: dict[str, str] = {}
        words = shlex.split(self.args)
        while words and words[0].startswith("--"):
            name, _, value = words.pop(0)[2:].partition("=")
            flags[name] = value
        return flags, words


@dataclass(frozen=True)
class Stage:
    base: str
    """The image it starts from, build-arg defaults substituted (or an earlier stage's name)."""
    name: str | None
    instructions: tuple[Instruction, ...]

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None

    def env(self) -> dict[str, str]:
        """Variables its ENV instructions set (`ENV A=1 B=2` form), last one wins."""
        values: dict[str, str] = {}
        for instruction in self.all("ENV"):
            for word in shlex.split(instruction.args):
                name, sep, value = word.partition("=")
                if sep:
                    values[name] = value
        return values

    def labels(self) -> dict[str, str]:
        values: dict[str, str] = {}
        for instruction in self.all("LABEL"):
            for word in shlex.split(instruction.args):
                name, sep, value = word.partition("=")
                if sep:
                    values[name] = value
        return values


@dataclass(frozen=True)
class Dockerfile:
    path: Path
    global_args: Mapping[str, str]
    """Defaults of the ARGs declared before the first FROM (the ones FROM may use)."""
    stages: tuple[Stage, ...]

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    @property
    def stage_names(self) -> set[str]:
        return {s.name for s in self.stages if s.name is not None}


def substitute(text: str, values: Mapping[str, str]) -> str:
    """`text` with `${NAME}`, `$NAME` and `${NAME:-default}` replaced as Docker does for FROM."""

    def replace(match: re.Match[str]) -> str:
        name = match["braced"] or match["bare"]
        found = values.get(name, "")
        if not found and match["default"] is not None:
            return match["default"]
        return found

    return _VARIABLE.sub(replace, text)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1])
            continue
        pending.append(stripped)
        lines.append((start, " ".join(part.strip() for part in pending if part.strip())))
        pending = []
    if pending:
        lines.append((start, " ".join(pending)))
    return lines


def parse(path: Path) -> Dockerfile:
    """Read `path` into its global ARG defaults and stages."""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    current: list[Instruction] | None = None
    base, name = "", None
    for number, line in _logical_lines(path.read_text(encoding="utf-8")):
        keyword, _, args = line.partition(" ")
        instruction = Instruction(keyword.upper(), args.strip(), number)
        if instruction.keyword == "FROM":
            if current is not None:
                stages.append(Stage(base, name, tuple(current)))
            words = args.split()
            words = [w for w in words if not w.startswith("--platform")]
            base = substitute(words[0], global_args)
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            current = []
        elif current is None:
            if instruction.keyword == "ARG":
                arg_name, _, default = args.strip().partition("=")
                global_args[arg_name] = default
        else:
            current.append(instruction)
    if current is not None:
        stages.append(Stage(base, name, tuple(current)))
    return Dockerfile(path, global_args, tuple(stages))


def dockerignore_patterns(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def is_ignored(relative: str, patterns: list[str]) -> bool:
    """Whether `.dockerignore` leaves `relative` (or a folder holding it) out of the context.

    Docker's rules, enough for ours: a pattern matches a path or any folder above it; `**/`
    matches any depth; a later `!pattern` brings a path back.
    """
    parts = relative.strip("/").split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        body = pattern[1:] if negated else pattern
        body = body.strip("/")
        candidates = [body]
        if body.startswith("**/"):
            candidates.append(body[3:])
        if any(fnmatch.fnmatchcase(p, c) for p in prefixes for c in candidates):
            ignored = not negated
    return ignored
