"""The suite registry and loader: :func:`get_suite` (names, ``module:SUITE``, files, entry points),
:func:`builtin_suite` for names read from records, and :func:`register_suite`. Kept apart from the
package face so that providers can load suites without importing the suite checks."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import sysconfig
import traceback
from contextlib import contextmanager
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from passk_nb.data.ids import content_id
from passk_nb.harness.suites.bank import SUITE as BANK
from passk_nb.harness.suites.base import Suite
from passk_nb.harness.suites.orders import SUITE as ORDERS
from passk_nb.harness.suites.starter import SUITE as STARTER
from passk_nb.harness.suites.starter2 import SUITE as STARTER2

SUITES: dict[str, Suite] = {s.name: s for s in (ORDERS, BANK, STARTER, STARTER2)}
#: Entry-point group under which installed packages register suites (``name = "module:SUITE"``).
ENTRY_POINT_GROUP = "passk_nb.suites"


def get_suite(suite: str | Suite) -> Suite:
    """A suite by name, by ``module:ATTRIBUTE`` or ``path/to/file.py:ATTRIBUTE``, from an
    installed package's entry point, or the suite itself; unknown names list the known ones."""
    if isinstance(suite, Suite):
        return suite
    if not isinstance(suite, str) or not suite:
        raise ValueError(f"suite must be a suite name or 'module:SUITE', got {suite!r}")
    if suite in SUITES:
        return SUITES[suite]
    if ":" in suite:
        return _import_suite(suite)
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name == suite:
            return _checked(point.load(), f"entry point {point.value!r}")
    raise ValueError(
        f"unknown suite {suite!r}; choose from {sorted(SUITES)}, give 'module:SUITE' or "
        f"'path/to/suite.py:SUITE' (a Suite object in a module or file), or install a package "
        f"registering one under the entry-point group {ENTRY_POINT_GROUP!r}"
    )


def _import_suite(spec: str) -> Suite:
    where, _, attribute = spec.rpartition(":")
    if not where or not attribute:
        raise ValueError(f"give a suite as module:NAME or path/to/suite.py:NAME, got {spec!r}")
    is_file = where.endswith(".py") or "/" in where or os.sep in where
    try:
        module = _load_file(Path(where)) if is_file else _load_module(where)
    except Exception as exc:
        if isinstance(exc, _NotLoadable) or _names_the_module(exc, where):
            raise ValueError(
                f"cannot import {where!r} for suite {spec!r}: {exc}; run from the folder that holds it, "
                "give its file path (path/to/suite.py:NAME) or install it"
            ) from None
        # the suite's own code failed as it loaded: name where, in one line
        raise ValueError(
            f"loading {where!r} for suite {spec!r} raised {type(exc).__name__}{raised_at(exc)}: {exc}"
        ) from exc
    if not hasattr(module, attribute):
        suites = [name for name, value in vars(module).items() if isinstance(value, Suite)]
        held = f"its Suite objects: {', '.join(suites)}" if suites else "it holds no Suite object"
        raise ValueError(f"{where!r} has no {attribute!r}; {held} (give {where}:NAME of one)")
    return _checked(getattr(module, attribute), spec)


class _NotLoadable(ImportError):
    """The file to load is missing or not Python (nothing of it ran)."""


def _names_the_module(exc: BaseException, module: str) -> bool:
    """Is ``exc`` the module itself not being found (rather than an import inside it failing)?"""
    name = getattr(exc, "name", None)
    return isinstance(exc, ModuleNotFoundError) and bool(name) and (module + ".").startswith(f"{name}.")


def raised_at(exc: BaseException) -> str:
    """`` at FILE:LINE``: where the user's code raised ``exc`` as a module loaded (the innermost
    frame outside Python's own modules, installed packages and passk_nb; a syntax error's own
    line), the path relative to the working directory when under it; empty when unknown.

    >>> try:
    ...     exec(compile("x = 1\\n1 / 0", "my_suite.py", "exec"))
    ... except ZeroDivisionError as exc:
    ...     raised_at(exc)
    ' at my_suite.py:2'
    """
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return f" at {_shown(exc.filename)}:{exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [frame for frame in frames if not _foreign(frame.filename)]
    if not frames:
        return ""
    frame = (ours or frames)[-1]
    return f" at {_shown(frame.filename)}:{frame.lineno}"


#: Folders whose frames are never the user's: Python's own modules, installed packages, passk_nb.
_NOT_USER_CODE = tuple(
    str(Path(p).resolve()) + os.sep
    for p in {
        *(sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")),
        str(Path(__file__).resolve().parents[2]),
    }
)


def _foreign(filename: str) -> bool:
    return filename.startswith("<") or str(Path(filename).resolve()).startswith(_NOT_USER_CODE)


def _shown(filename: str) -> str:
    path = Path(filename)
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        return filename


@contextmanager
def _first_on_path(folder: str) -> Any:
    """``folder`` first on ``sys.path`` for the block, as ``python -m`` puts the working directory."""
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        sys.path.remove(folder)


def _load_module(name: str) -> Any:
    with _first_on_path(os.getcwd()):
        return importlib.import_module(name)


def _load_file(path: Path) -> Any:
    if not path.is_file():
        raise _NotLoadable(f"no file {str(path)!r}")
    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path.resolve()):
        return loaded
    if loaded is not None:  # a file named like a module already loaded (json.py): never shadow it
        name = f"passk_suite_{content_id(str(path.resolve()))}_{name}"
        if name in sys.modules:
            return sys.modules[name]
    loader_spec = importlib.util.spec_from_file_location(name, path.resolve())
    if loader_spec is None or loader_spec.loader is None:
        raise _NotLoadable(f"{str(path)!r} is not a Python file")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up by name
    try:
        with _first_on_path(str(path.resolve().parent)):  # its own sibling modules import
            loader_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _checked(value: object, where: str) -> Suite:
    if not isinstance(value, Suite):
        kind = type(value).__name__
        article = "an" if kind[:1].lower() in "aeiou" else "a"
        raise ValueError(f"{where} is {article} {kind}, not a Suite; build one with make_suite()")
    return value


def builtin_suite(name: str) -> Suite:
    """A built-in or :func:`register_suite`-registered suite by name, never imported from elsewhere:
    for names read from records, which are data (:func:`~passk_nb.harness.regrade.regrade`).

    >>> builtin_suite("bank").name
    'bank'
    """
    if isinstance(name, str) and name in SUITES:
        return SUITES[name]
    raise ValueError(
        f"the records name suite {name!r}, which is neither built in ({', '.join(sorted(SUITES))}) nor "
        "registered; records are data, so code they name is never imported: name the suite to grade "
        "with yourself (regrade(df, suite=...): a Suite, 'module:SUITE' or 'path/to/suite.py:SUITE')"
    )


def register_suite(suite: Suite) -> None:
    """Make ``suite`` available by name to ``run`` and the CLI."""
    SUITES[suite.name] = suite
