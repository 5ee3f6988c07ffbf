"""Find the actors of an app given as a path (file or folder) or a module name.

Imports the code (that is how `@actor` records specs), so this is an edge module: it touches
`sys.path` and the import system. A folder with `__init__.py` is a package and its direct
submodules are imported too; a folder without one is a set of top-level modules. A module (or
the package) may declare `ROUTE = ["a", "b", ...]`, the route inputs take by default.

Whatever user code raises while it is imported (a SyntaxError, a module-level exception, a
misspelt option) becomes an `ActorDefinitionError` naming the user's file, line and error:
a user should not have to read a traceback through asya's import machinery.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import sysconfig
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import asya
from asya.actor import ActorSpec, spec_of
from asya.errors import ActorDefinitionError

ROUTE_ATTRIBUTE = "ROUTE"


@dataclass(frozen=True)
class App:
    """The actors found, the default route, and where their code lives."""

    specs: tuple[ActorSpec, ...]
    route: tuple[str, ...] | None
    search_path: str | None
    """A folder to put on PYTHONPATH so other processes can import the same modules."""


def load_app(target: str) -> App:
    """Import `target` and collect its actors.

    Raises:
        ActorDefinitionError: nothing to import, no actors found, or a bad ROUTE.
    """
    search_path, modules = _import_target(target)
    names = {m.__name__ for m in modules}
    specs = _actors_defined_in(modules)
    if not specs:
        raise ActorDefinitionError(
            f"no @actor found in '{target}' (imported: {', '.join(sorted(names))})"
        )
    route = _declared_route(modules, specs, target)
    return App(specs=specs, route=route, search_path=search_path)


def _actors_defined_in(modules: list[ModuleType]) -> tuple[ActorSpec, ...]:
    # Read the specs off the modules rather than the registry: a module imported earlier in
    # this process is not executed again, but its decorated objects still carry their spec.
    found: dict[str, ActorSpec] = {}
    for module in modules:
        for value in vars(module).values():
            spec = spec_of(value)
            if spec is not None and spec.module == module.__name__:
                found.setdefault(spec.name, spec)
    return tuple(found.values())


def _import_target(target: str) -> tuple[str | None, list[ModuleType]]:
    path = Path(target)
    if path.exists():
        path = path.resolve()
        if path.is_dir() and (path / "__init__.py").exists():
            return _with_path(path.parent), _import_package(path.name)
        if path.is_dir():
            names = sorted(p.stem for p in path.glob("*.py") if not _skipped(p.stem))
            return _with_path(path), [_import(n) for n in names]
        if path.suffix == ".py":
            return _with_path(path.parent), [_import(path.stem)]
        raise ActorDefinitionError(f"'{target}' is neither a folder nor a .py file")
    return None, _import_package(target)


def _with_path(folder: Path) -> str:
    entry = str(folder)
    if entry not in sys.path:
        sys.path.insert(0, entry)
    return entry


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # the user's code, whatever it raises, at the edge of asya
        raise ActorDefinitionError(f"cannot import '{name}': {_describe(exc)}") from exc


_LIBRARY_DIRS = tuple(
    str(Path(p).resolve())
    for p in {
        str(Path(asya.__file__).parent),
        *(sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")),
    }
)
_MAX_FRAMES = 3


def _describe(exc: BaseException) -> str:
    """`file, line N: Type: message`, with the user's own frames only (innermost last)."""
    error = f"{type(exc).__name__}: {exc}"
    places = [f"{f.filename}, line {f.lineno}" for f in _user_frames(exc)][-_MAX_FRAMES:]
    if isinstance(exc, SyntaxError) and exc.filename:
        # The error is in the file being compiled, which is in no frame of the traceback.
        error = f"SyntaxError: {exc.msg}"
        places = [*places, f"{exc.filename}, line {exc.lineno}"][-_MAX_FRAMES:]
    if not places:
        return error
    return f"{' -> '.join(places)}: {error}"


def _user_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    frames = traceback.extract_tb(exc.__traceback__)
    return [f for f in frames if _is_user_file(f.filename)]


def _is_user_file(filename: str) -> bool:
    if filename.startswith("<"):  # <frozen importlib._bootstrap>, <string>
        return False
    resolved = str(Path(filename).resolve())
    return not any(resolved.startswith(d + "/") for d in _LIBRARY_DIRS)


def _import_package(name: str) -> list[ModuleType]:
    root = _import(name)
    modules = [root]
    for info in pkgutil.iter_modules(getattr(root, "__path__", [])):
        if not _skipped(info.name):
            modules.append(_import(f"{name}.{info.name}"))
    return modules


def _skipped(name: str) -> bool:
    return name.startswith(("_", "test", "conftest"))


def _declared_route(
    modules: list[ModuleType], specs: tuple[ActorSpec, ...], target: str
) -> tuple[str, ...] | None:
    declared = [m for m in modules if hasattr(m, ROUTE_ATTRIBUTE)]
    if not declared:
        return None
    raw = getattr(declared[0], ROUTE_ATTRIBUTE)
    if not isinstance(raw, list | tuple) or not raw or not all(isinstance(x, str) for x in raw):
        raise ActorDefinitionError(
            f"{declared[0].__name__}.{ROUTE_ATTRIBUTE} must be a non-empty list of actor names,"
            f" got {raw!r}"
        )
    known = {s.name for s in specs}
    unknown = [name for name in raw if name not in known]
    if unknown:
        raise ActorDefinitionError(
            f"{declared[0].__name__}.{ROUTE_ATTRIBUTE} names {unknown}, which '{target}' does not"
            f" define (actors found: {', '.join(sorted(known))})"
        )
    return tuple(raw)
