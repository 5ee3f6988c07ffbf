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


@pytest.mark.parametrize(
    ("source", "line", "error"),
    [
        pytest.param("x = 1\ndef f(:\n    pass\n", 2, "SyntaxError: ", id="syntax-error"),
        pytest.param(
            "from asya import actor\n\nraise RuntimeError('no config file')\n",
            3,
            "RuntimeError: no config file",
            id="module-level-exception",
        ),
        pytest.param(
            "from asya import RetryPolicy, actor\n\n"
            "@actor(retry=RetryPolicy(max_attempt=3))\ndef a(d): return d\n",
            3,
            "'max_attempt'",
            id="misspelt-retry-policy-keyword",
        ),
    ],
)
def test_an_error_raised_while_importing_user_code_names_the_file_and_line(
    app_dir, source, line, error
):
    write(app_dir / "faulty_app.py", source)

    with pytest.raises(ActorDefinitionError) as caught:
        load_app(str(app_dir / "faulty_app.py"))

    message = str(caught.value)
    assert message.startswith(
        f"cannot import 'faulty_app': {app_dir / 'faulty_app.py'}, line {line}: "
    )
    assert error in message
    assert "\n" not in message


def test_an_error_in_a_module_the_app_imports_shows_only_the_users_frames(app_dir):
    write(app_dir / "deep_pkg" / "__init__.py", "")
    write(app_dir / "deep_pkg" / "pipeline.py", "from asya import actor\nfrom . import settings\n")
    write(app_dir / "deep_pkg" / "settings.py", "import json\nVALUES = json.loads('{bad')\n")

    with pytest.raises(ActorDefinitionError) as caught:
        load_app(str(app_dir / "deep_pkg"))

    pipeline, settings = app_dir / "deep_pkg" / "pipeline.py", app_dir / "deep_pkg" / "settings.py"
    assert str(caught.value).startswith(
        f"cannot import 'deep_pkg.pipeline': {pipeline}, line 2 -> {settings}, line 2:"
        " JSONDecodeError: "
    )
