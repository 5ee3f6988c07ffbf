"""The README and the guides do what they say: every shell command in them runs (or, needing a
cluster, is checked) in the order a reader meets it, exits as the page says, and prints what
the page shows; every file a page quotes is the file in the repository; every link resolves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.docs.commands import exercise, kind_of, needs_broker, workdir
from tests.docs.pages import (
    DOCS,
    GUIDES,
    README,
    ROOT,
    anchors,
    blocks,
    commands,
    output_matches,
    relative_links,
)


def _page_param(page: Path):
    marks = [pytest.mark.rabbitmq] if any(needs_broker(c) for c in commands(page)) else []
    return pytest.param(page, marks=marks, id=page.name)


def test_every_command_of_the_readme_and_the_guides_is_one_a_test_runs():
    found = [c for page in GUIDES for c in commands(page)]
    unknown = []
    for command in found:
        try:
            kind_of(command)
        except KeyError as exc:
            unknown.append(str(exc))

    assert len(found) > 40
    assert unknown == []


@pytest.mark.parametrize("page", [_page_param(page) for page in GUIDES])
def test_the_pages_commands_do_what_the_page_says(page, tmp_path, request):
    # Given: the page's own files (`app.py`:) in a working directory that sees the repository
    cwd = workdir(tmp_path)
    for block in blocks(page):
        if block.label and "/" not in block.label:
            (cwd / block.label).write_text(block.text)
    broker = None
    if any(needs_broker(c) for c in commands(page)):
        broker = request.getfixturevalue("amqp_url")

    for command in commands(page):
        # When: each command, in the page's order
        ran = exercise(command, cwd, broker)

        # Then: it prints what the page shows under it, and writes what it says it writes
        if command.shown is not None:
            printed = (ran.stdout + ran.stderr).splitlines()
            problem = output_matches(command.shown, printed)
            assert problem is None, f"{command}: {problem}\nprinted:\n{ran.stdout}{ran.stderr}"
        if command.stdout_to and command.stdout_to.endswith(".jsonl"):
            lines = (cwd / command.stdout_to).read_text().splitlines()
            assert lines
            assert all(isinstance(json.loads(line), dict) for line in lines)


@pytest.mark.parametrize("page", GUIDES, ids=lambda p: p.name)
def test_every_repository_file_a_page_quotes_is_that_file_as_it_stands(page):
    quoted = [b for b in blocks(page) if b.label and "/" in b.label]

    for block in quoted:
        assert (ROOT / block.label).read_text() == block.text, (
            f"{page.name}:{block.line}: the block is not {block.label} as it stands"
        )


def test_the_readme_maps_every_page_of_the_docs():
    linked = {(README.parent / target.split("#")[0]).resolve() for target in relative_links(README)}

    assert set(DOCS.glob("*.md")) <= linked


@pytest.mark.parametrize(
    "page",
    [README, *sorted(DOCS.glob("*.md")), *sorted(ROOT.glob("examples/*/README.md"))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_every_link_inside_the_repository_resolves(page):
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        missing_anchor = anchor and resolved.suffix == ".md" and anchor not in anchors(resolved)
        if not resolved.exists() or missing_anchor:
            broken.append(target)

    assert broken == []
