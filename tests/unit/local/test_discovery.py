"""Finding an app's actors from a path or a module name."""

from __future__ import annotations

import textwrap

import pytest

from asya.errors import ActorDefinitionError
from asya.local.discovery import load_app


@pytest.fixture
def app_dir(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    monkeypatch.setattr("sys.modules", dict(__import__("sys").modules))
    return tmp_path


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_a_package_folder_is_imported_with_its_submodules_and_its_route(app_dir):
    write(app_dir / "pipe_pkg" / "__init__.py", 'ROUTE = ["one", "two"]\n')
    write(
        app_dir / "pipe_pkg" / "steps.py",
        """
        from asya import actor
        @actor
        def one(doc): return doc
        @actor
        def two(doc): return doc
    """,
    )
    write(
        app_dir / "pipe_pkg" / "test_steps.py", "raise AssertionError('tests are not imported')\n"
    )

    app = load_app(str(app_dir / "pipe_pkg"))

    assert [s.name for s in app.specs] == ["one", "two"]
    assert app.route == ("one", "two")
    assert app.search_path == str(app_dir)


def test_a_single_file_is_an_app(app_dir):
    write(app_dir / "single_app.py", "from asya import actor\n@actor\ndef only(doc): return doc\n")

    app = load_app(str(app_dir / "single_app.py"))

    assert [s.name for s in app.specs] == ["only"]
    assert app.route is None


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("x = 1\n", "no @actor found", id="no-actors"),
        pytest.param(
            "from asya import actor\n@actor\ndef a(d): return d\nROUTE = 'a'\n",
            "must be a non-empty list of actor names",
            id="route-not-list",
        ),
        pytest.param(
            "from asya import actor\n@actor\ndef a(d): return d\nROUTE = ['a', 'b']\n",
            "names ['b'], which",
            id="route-unknown",
        ),
        pytest.param("import not_installed_anywhere\n", "cannot import", id="import-error"),
    ],
)
def test_an_app_that_cannot_run_says_why(app_dir, source, expected):
    write(app_dir / "broken_app.py", source)

    with pytest.raises(ActorDefinitionError) as caught:
        load_app(str(app_dir / "broken_app.py"))

    assert expected in str(caught.value)
