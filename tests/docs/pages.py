"""The docs read as data: their code blocks, the shell commands in them, sample outputs, files
a page names and links.

A page's shell commands are the lines of its ```bash blocks (a trailing `\\` joins the next
line; `# ...` comments are dropped, except `# exits N`, which is the exit status the command
must end with) and the `$ ` lines of its plain ``` blocks, whose following lines are the output
the command must print: each shown line matches one printed line, in order, `...` standing for
any text within a line, or on a line of its own for any number of lines. A code block right
after a line ending in `` `NAME`: `` is the file NAME: a path in this repository, which the
block must equal, or a bare name, which the page's commands may use from their working
directory.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
GUIDES = (
    README,
    DOCS / "guide-data-scientist.md",
    DOCS / "guide-platform-engineer.md",
    DOCS / "troubleshooting.md",
)
"""The pages whose every command a test runs (or, where it needs a cluster, checks)."""

NO_GPU_ONLY = "on a machine without a GPU"
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.DOTALL | re.MULTILINE)
_EXITS = re.compile(r"#\s*exits (\d+)( " + NO_GPU_ONLY + r")?\s*$")
_LABEL = re.compile(r"`([^`]+)`:\s*$")
_ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    text: str
    label: str | None
    """The file the page says this block is (the `` `NAME`: `` line before it), or None."""


@dataclass(frozen=True)
class Command:
    page: Path
    line: int
    text: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    stdout_to: str | None = None
    append: bool = False
    exits: int = 0
    exits_only_without_gpu: bool = False
    """`# exits N on a machine without a GPU`: N there, 0 where a GPU is."""
    shown: tuple[str, ...] | None = None
    """For a `$ ` line: the output the page shows under it."""

    def __str__(self) -> str:
        return f"{self.page.name}:{self.line}: {self.text}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in _BLOCK.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        label = _LABEL.search(before)
        found.append(
            Block(
                page=page,
                line=text.count("\n", 0, match.start()) + 2,
                language=match.group(1),
                text=match.group(2),
                label=label.group(1) if label else None,
            )
        )
    return found


def commands(page: Path) -> list[Command]:
    """Every shell command of the page, in the order a reader meets them."""
    found: list[Command] = []
    for block in blocks(page):
        if block.language in ("bash", "sh"):
            for line, text in _logical_lines(block):
                if text.strip() and not text.lstrip().startswith("#"):
                    found.append(_command(page, line, text))
        elif block.language == "" and block.text.startswith("$ "):
            found += _transcripts(block)
    return found


def _logical_lines(block: Block) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for offset, raw in enumerate(block.text.splitlines()):
        if pending is not None:
            start, text = pending
            text = f"{text} {raw.strip()}"
        else:
            start, text = block.line + offset, raw
        if text.endswith("\\"):
            pending = (start, text[:-1].rstrip())
            continue
        pending = None
        lines.append((start, text))
    return lines


def _transcripts(block: Block) -> list[Command]:
    found: list[Command] = []
    current: tuple[int, str] | None = None
    shown: list[str] = []
    for line, text in _logical_lines(block):
        if text.startswith("$ "):
            if current is not None:
                found.append(_command(block.page, *current, shown=tuple(shown)))
            current, shown = (line, text[2:]), []
        else:
            shown.append(text)
    if current is not None:
        found.append(_command(block.page, *current, shown=tuple(shown)))
    return found


def _command(page: Path, line: int, text: str, shown: tuple[str, ...] | None = None) -> Command:
    exits, without_gpu = 0, False
    annotation = _EXITS.search(text)
    if annotation:
        exits, without_gpu = int(annotation.group(1)), annotation.group(2) is not None
    tokens = shlex.split(text, comments=True)
    env = {}
    while tokens and _ENV.match(tokens[0]):
        name, _, value = tokens.pop(0).partition("=")
        env[name] = value
    stdout_to, append = None, False
    for redirect in (">", ">>"):
        if redirect in tokens:
            at = tokens.index(redirect)
            stdout_to, append = tokens[at + 1], redirect == ">>"
            del tokens[at : at + 2]
    return Command(
        page=page,
        line=line,
        text=text.strip(),
        argv=tuple(tokens),
        env=env,
        stdout_to=stdout_to,
        append=append,
        exits=exits,
        exits_only_without_gpu=without_gpu,
        shown=shown,
    )


def output_matches(shown: tuple[str, ...], printed: list[str]) -> str | None:
    """None when `printed` shows what the page shows (see the module docstring); else what
    was not found."""
    at = 0
    skipping = False
    for want in shown:
        if want.strip() == "...":
            skipping = True
            continue
        pattern = re.compile(".*?".join(re.escape(part) for part in want.rstrip().split("...")))
        while at < len(printed) and not pattern.fullmatch(printed[at].rstrip()):
            if not skipping:
                return f"expected {want!r}, printed {printed[at]!r}"
            at += 1
        if at == len(printed):
            return f"{want!r} is not in the output"
        at += 1
        skipping = False
    return None


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(page: Path) -> list[str]:
    """The page's Markdown links that point inside this repository."""
    return [
        target
        for target in _LINK.findall(page.read_text(encoding="utf-8"))
        if not re.match(r"[a-z]+:", target)
    ]


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of the page's headings."""
    found = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            title = line.lstrip("#").strip().lower().replace("`", "")
            found.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return found
