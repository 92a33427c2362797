"""Benchmarks import only public names (issue 45): a benchmark that reaches into ``_private``
code measures something no user can call, and breaks silently when that code moves (benchmarks
are not run by the test suite)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def private_imports(source: str) -> list[str]:
    """Each import of ours in ``source`` that names a private module or a private name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "passk_nb":
            module = str(node.module)
            if any(part.startswith("_") for part in module.split(".")):
                found.append(f"from {module} import ...")
            found += [f"from {module} import {a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "passk_nb" and any(part.startswith("_") for part in parts):
                    found.append(f"import {alias.name}")
    return found


def test_the_check_finds_every_kind_of_private_import():
    source = (
        "from passk_nb.stats._grouping import group_ids\n"
        "from passk_nb.stats.summary import curve, _summary\n"
        "import passk_nb.stats._grouping as g\n"
        "def f():\n    from passk_nb.view.widgets import _table_html\n"
        "from passk_nb.stats.summary import curve\nimport passk_nb\nfrom coverage import _x\n"
    )
    assert private_imports(source) == [
        "from passk_nb.stats._grouping import ...",
        "from passk_nb.stats.summary import _summary",
        "import passk_nb.stats._grouping",
        "from passk_nb.view.widgets import _table_html",
    ]


def test_benchmarks_import_only_public_names():
    benchmarks = sorted((ROOT / "benchmarks").glob("*.py"))
    assert len(benchmarks) > 5
    found = {p.name: private_imports(p.read_text(encoding="utf-8")) for p in benchmarks}
    assert {name: imports for name, imports in found.items() if imports} == {}
