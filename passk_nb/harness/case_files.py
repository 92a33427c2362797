"""Loading what users bring: case files (JSON, or Python with ``CASES``), agents (``module:function``)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from passk_nb.harness.cases import case_name, validate_cases
from passk_nb.harness.suites.registry import raised_at

Agent = Callable[[Any], Any]


def _module_from_file(path: Path) -> ModuleType:
    """Execute a Python file as a fresh module; any error becomes an ImportError naming the file."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
    name = f"_passk_file_{digest}_{path.stem}".replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path} as Python; is it a .py file?")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ImportError(f"running {path} failed: {type(exc).__name__}{raised_at(exc)}: {exc}") from exc
    return module


def load_cases(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read cases from a ``.json`` file or a ``.py`` file, checked as :func:`run_cases` checks them.

    - JSON: a list of objects ``{"name": ..., "input": ..., "expected": "substring"}``
      (``name`` optional). JSON cannot hold a function, so no ``check``.
    - Python: a file whose top level defines ``CASES``, a list of dicts that
      may use ``check`` functions. The file is executed (trust it as you would
      any code you import).

    Errors say what to fix: ``FileNotFoundError`` (no such file), ``ValueError``
    (invalid JSON with its line and column, another suffix, a malformed case),
    ``TypeError`` (not a list), ``ImportError`` (the ``.py`` file has no
    ``CASES`` or raised while running).

    >>> import json, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "cases.json"
    >>> _ = path.write_text(json.dumps([{"name": "math", "input": "2+2", "expected": "4"}]))
    >>> load_cases(path)
    [{'name': 'math', 'input': '2+2', 'expected': '4'}]
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no case file at {str(path)!r}: give a .json list of cases or a .py file defining CASES"
        )
    if path.suffix == ".json":
        cases = _cases_from_json(path)
    elif path.suffix == ".py":
        module = _module_from_file(path)
        if not hasattr(module, "CASES"):
            raise ImportError(f"{path} defines no CASES; add CASES = [{{'input': ..., 'expected': ...}}]")
        cases = module.CASES
        if not isinstance(cases, list):
            raise TypeError(f"{path}: CASES must be a list of dicts, got {type(cases).__name__}")
    else:
        raise ValueError(f"case file {str(path)!r} must end in .json or .py")
    validate_cases(cases, source=str(path))
    return cases


def _cases_from_json(path: Path) -> Any:
    try:
        cases = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise ValueError(f"{path}: invalid JSON at {where}: {exc.msg}") from None
    if not isinstance(cases, list):
        raise TypeError(
            f'{path} must hold a JSON list of cases [{{"input": ..., "expected": ...}}], '
            f"got a JSON {type(cases).__name__}"
        )
    for i, case in enumerate(cases):
        if not isinstance(case, dict):
            continue  # reported by validate_cases
        if "check" in case:
            raise ValueError(
                f"{path}: case {case_name(case, i)!r} has 'check', but JSON cannot hold a "
                "function; use 'expected', or a .py case file defining CASES"
            )
        if "expected" in case and not isinstance(case["expected"], str):
            raise ValueError(
                f"{path}: case {case_name(case, i)!r}: 'expected' must be a string, got {case['expected']!r}"
            )
    return cases


def load_agent(spec: str) -> Agent:
    """Import the agent named by ``"module:function"`` or ``"path/to/file.py:function"``.

    Raises ``ValueError`` for a malformed spec, ``FileNotFoundError`` for a
    missing file, ``ImportError`` (saying what to fix) for a module or
    function that cannot be found, ``TypeError`` when the name is not callable.

    >>> load_agent("os.path:basename")("a/b.txt")
    'b.txt'
    """
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise ValueError(f"agent {spec!r} must be module:function or path/to/file.py:function")
    if target.endswith(".py") or "/" in target or os.sep in target:
        path = Path(target)
        if not path.is_file():
            raise FileNotFoundError(f"agent file {target!r} does not exist; check the path in {spec!r}")
        module = _module_from_file(path)
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            if exc.name and (target == exc.name or target.startswith(exc.name + ".")):
                raise ImportError(
                    f"no module named {target!r}: run from the folder that holds it, install it, "
                    f"or give its file: path/to/{target.replace('.', '/')}.py:{attr}"
                ) from exc
            raise ImportError(f"importing {target!r} failed: {exc}; install the missing module") from exc
        except Exception as exc:
            raise ImportError(
                f"importing {target!r} failed: {type(exc).__name__}{raised_at(exc)}: {exc}"
            ) from exc
    if not hasattr(module, attr):
        defined = sorted(
            n
            for n, v in vars(module).items()
            if callable(v) and not n.startswith("_") and getattr(v, "__module__", None) == module.__name__
        )
        raise ImportError(
            f"{target!r} has no attribute {attr!r}; functions it defines: {', '.join(defined) or 'none'}"
        )
    agent = getattr(module, attr)
    if not callable(agent):
        raise TypeError(f"{spec!r} is a {type(agent).__name__}, not a function of the case input")
    return agent
