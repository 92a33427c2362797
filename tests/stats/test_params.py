"""The one vocabulary: defaults are written once, in ``stats/params.py``, and every caller reads them."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import passk_nb
from passk_nb.stats import params
from passk_nb.stats.accessor import PasskAccessor

PACKAGE = Path(passk_nb.__file__).parent


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module's code, docstrings left out (prose may name a method)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_the_default_interval_is_named_only_in_params() -> None:
    hard_coded = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "params.py"
        for line, value in _code_strings(path)
        if value == params.METHOD
    ]
    assert not hard_coded, f"{params.METHOD!r} hard-coded outside params.py: {hard_coded}"


@pytest.mark.parametrize("name", ["summarize", "curve", "compare"])
def test_the_accessor_has_the_functions_defaults(name: str) -> None:
    function = inspect.signature(getattr(passk_nb, name)).parameters
    method = inspect.signature(getattr(PasskAccessor, name)).parameters
    shared = set(function) & set(method) - {"df", "self"}
    assert {"method", "ci", "by"} <= shared
    assert {p: method[p].default for p in shared} == {p: function[p].default for p in shared}


def test_no_public_docstring_keeps_a_shared_placeholder() -> None:
    """A function that lost its @share_docs (summarize once did, to a class put above it) shows
    ``{k}``, ``{by}`` … in its help instead of the shared sentences."""
    import inspect

    import passk_nb
    from passk_nb.stats.params import DOCS

    faces = [passk_nb, *(getattr(passk_nb, face) for face in ("data", "stats", "view", "harness"))]
    public = {name: getattr(face, name) for face in faces for name in face.__all__}  # the lazy names too
    left = {
        name: [key for key in DOCS if "{" + key + "}" in (inspect.getdoc(obj) or "")]
        for name, obj in public.items()
        if callable(obj)
    }
    assert "summarize" in left and len(left) > 30
    assert not {name: keys for name, keys in left.items() if keys}
