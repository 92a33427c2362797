"""The docs say what the code does: the generated column table, the --json-schema backends."""

import inspect
import re
import subprocess
import sys
from pathlib import Path

from passk_nb.cli.main import build_parser
from passk_nb.data.records import DESCRIPTIONS
from passk_nb.harness.providers import PROVIDERS, _load

ROOT = Path(__file__).resolve().parents[2]


def test_columns_doc_is_generated_from_the_records_module():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "columns_table.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    text = (ROOT / "docs" / "columns.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| `[^`]+` \| (.*) \|$", text, re.MULTILINE)
    assert [name for name, _ in rows] == list(DESCRIPTIONS)
    assert "docs/columns.md" in (ROOT / "README.md").read_text()


def _takes(cls: type, option: str) -> bool:
    return any(
        option in inspect.signature(c.__init__).parameters for c in cls.__mro__ if "__init__" in vars(c)
    )


def _schema_works(name: str) -> bool:
    """The backend takes json_schema and, with it, JSON mode (anthropic takes neither in practice)."""
    if not _takes(_load(name), "json_schema"):
        return False
    try:
        _load(name)("m", json_mode=True, json_schema=True)
    except ValueError:
        return False
    return True


def test_json_schema_backends_agree_in_code_help_and_the_guide():
    with_schema = {name for name in PROVIDERS if _schema_works(name)}
    assert with_schema == {"ollama", "openai"}
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    help_text = next(a.help for a in run._actions if "--json-schema" in a.option_strings)
    guide = " ".join((ROOT / "docs" / "guide" / "running.md").read_text().split())
    start = guide.index("`--json-schema` (with `--json-mode`)")
    sentence = guide[start : guide.index("part of the run's identity", start)]
    for name in PROVIDERS:
        assert (name in help_text) == (name in with_schema), name
        assert (f"`{name}` provider" in sentence) == (name in with_schema), name


def test_readme_states_estimates_as_estimates():
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "has pass@2 = 1.0 but pass^4 = 0" not in readme
    assert "not the agent's true values" in readme and "0.32" in readme


def _defined_tests() -> set[str]:
    return {
        m.group(1)
        for path in (ROOT / "tests").rglob("test_*.py")
        for m in re.finditer(r"^\s*(?:async\s+)?def (test_\w+)\(", path.read_text(encoding="utf-8"), re.M)
    }


def test_every_test_the_guarantees_page_names_exists():
    # the Guarantees page says each promise "is checked by the test named after it": a renamed
    # or never-written test (issue 29's audit found one) leaves a promise unchecked
    page = (ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8")
    assert "Each promise below is checked by the test named after it." in page
    named = set(re.findall(r"`(test_\w+)`", page))
    assert len(named) > 50
    assert sorted(named - _defined_tests()) == []
    files = set(re.findall(r"`(tests/[\w/]+\.py)`", page))
    assert files and all((ROOT / f).is_file() for f in files), files


def test_every_test_the_readme_and_the_docs_name_exists():
    # the guide and methods pages name tests beside their promises too (moved from the README)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    named = {(p.name, t) for p in pages for t in re.findall(r"`(test_\w+)`", p.read_text(encoding="utf-8"))}
    assert len(named) > 80
    assert sorted(pair for pair in named if pair[1] not in _defined_tests()) == []
    files = {f for p in pages for f in re.findall(r"`(tests/[\w/]+\.py)`", p.read_text(encoding="utf-8"))}
    assert files and all((ROOT / f).is_file() for f in files), files
