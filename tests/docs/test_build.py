"""The site builds strictly from the tree as it is, with every public name and command on it."""

from __future__ import annotations

import importlib
import importlib.util
import re
import shutil
from types import ModuleType

import nbformat
import pytest

from tests.docs.conftest import BUILD, ROOT, require_docs_extra

FACES = [
    "passk_nb",
    "passk_nb.data",
    "passk_nb.stats",
    "passk_nb.view",
    "passk_nb.harness",
    "passk_nb.harness.providers",
    "passk_nb.harness.suites",
    "passk_nb.importers",
    "passk_nb.exporters",
]


def load_script(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.rsplit("/", 1)[-1][:-3], ROOT / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pages() -> ModuleType:
    """docs/_build_pages.py, the site's generator and checks (it imports sphinx)."""
    require_docs_extra()
    return load_script("docs/_build_pages.py")


def test_the_reference_shows_every_face_of_the_package(pages):
    assert list(pages.FACES) == FACES
    top = importlib.import_module("passk_nb")
    assert {f"passk_nb.{name}" for name in top._FACES} <= set(FACES)


@pytest.mark.slow
def test_every_public_name_has_an_entry_and_every_command_its_help(site):
    """The strict build passed (the fixture); each name of each face's ``__all__`` has its entry:
    its own anchor, or (an object shown on an earlier face) a line naming where it is."""
    anchors = set()
    for page in (site / "reference" / "api").glob("*.html"):
        anchors |= set(re.findall(r'id="(passk_nb[\w.]*)"', page.read_text()))
    for face in FACES[1:]:
        text = (site / "reference" / "api" / f"{face}.html").read_text()
        for name in importlib.import_module(face).__all__:
            pointer = rf"<span class=\"pre\">{name}</span></code></dt>\s*<dd><p>the same object as"
            assert f"{face}.{name}" in anchors or re.search(pointer, text), f"{face}.{name} is missing"
    top = (site / "reference" / "api" / "passk_nb.html").read_text()
    for name in importlib.import_module("passk_nb").__all__:
        assert name.startswith("__") or f'<span class="pre">{name}</span>' in top, name
    assert 'id="passk_nb.stats.summarize"' in (site / "reference" / "api" / "passk_nb.stats.html").read_text()
    from passk_nb.cli.main import build_parser, subcommands

    cli = (site / "reference" / "cli.html").read_text()
    for command, parser in subcommands(build_parser()).items():
        assert f'id="cli-{command}"' in cli, command
        assert all(f"--{flag.lstrip('-')}" in cli for flag in parser._option_string_actions), command


def test_parameter_paragraphs_render_as_fields(pages):
    lines = [
        "What it does.",
        "",
        "data: the records,",
        "    or a folder.",
        "on, a, b: arms.",
        "",
        "Prose: yes.",
    ]
    original = list(lines)
    pages.parameter_fields(None, "function", "f", None, None, lines)
    fields = [":param data: the records,", "    or a folder.", ":on, a, b: arms."]
    assert lines == ["What it does.", "", *fields, "", "Prose: yes."]
    pages.parameter_fields(None, "class", "C", None, None, original)
    assert original[2:5] == [":data: the records,", "    or a folder.", ":on, a, b: arms."]
    prose = ["Note that: this stays", "a paragraph."]
    pages.parameter_fields(None, "function", "f", None, None, prose)
    assert prose == ["Note that: this stays", "a paragraph."]


def test_a_reference_resolves_to_what_exists_and_a_renamed_name_does_not(pages):
    import passk_nb.stats

    assert pages.locate("passk_nb.stats.summary.summarize") == (True, passk_nb.stats.summarize)
    assert pages.locate("pd.DataFrame")[0] and pages.locate("int")[0]
    assert pages.locate("passk_nb.stats.summary.summarise") == (False, None)
    assert pages.locate("passk_nb.no_such_module.x") == (False, None)


def test_the_committed_tutorials_are_the_notebooks_executed():
    render = load_script("scripts/render_notebooks.py")
    assert sorted(p.stem for p in render.TUTORIALS.glob("*.ipynb")) == sorted(
        p.stem for p in render.NOTEBOOKS.glob("*.ipynb")
    )
    assert render.main(["--check"]) == 0


def test_a_tutorial_copy_missing_unexecuted_edited_or_failing_is_a_problem(tmp_path, monkeypatch):
    render = load_script("scripts/render_notebooks.py")
    monkeypatch.setattr(render, "TUTORIALS", tmp_path)
    name = "01-quickstart"
    assert render.problems(name) == [f"{tmp_path / name}.ipynb is missing"]
    shutil.copy(render.NOTEBOOKS / f"{name}.ipynb", tmp_path)  # committed clean: no outputs
    assert render.problems(name) == [f"{tmp_path / name}.ipynb: not executed (cells without outputs)"]
    executed = nbformat.read(ROOT / "docs" / "tutorials" / f"{name}.ipynb", as_version=4)
    code = next(cell for cell in executed.cells if cell.cell_type == "code")
    code.source += "\n1 + 1"
    code.outputs.append(nbformat.v4.new_output("error", ename="E", evalue="", traceback=[]))
    nbformat.write(executed, tmp_path / f"{name}.ipynb")
    assert [p.split(": ")[1] for p in render.problems(name)] == [
        f"its cells differ from notebooks/{name}.ipynb",
        "a cell raised an error",
    ]


@pytest.mark.parametrize(
    ("reference", "builds"),
    [
        ("passk_nb.stats.summary.summarize", True),  # exists: shown (linked on the real site)
        ("pd.DataFrame", True),  # a third-party name: shown as text, no inventory is fetched
        ("passk_nb.stats.summary.summarise", False),  # a name that exists nowhere: the build fails
    ],
)
def test_a_strict_build_fails_on_a_reference_to_nothing(pages, tmp_path, reference, builds):
    import subprocess

    (tmp_path / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'docs')!r})\nimport _build_pages\n"
        "nitpicky = True\n"
        "def setup(app):\n    app.connect('missing-reference', _build_pages.resolve_reference)\n"
    )
    (tmp_path / "index.rst").write_text(f"Page\n====\n\nSee :func:`{reference}`.\n")
    done = subprocess.run(
        [*BUILD, "-q", str(tmp_path), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (done.returncode == 0) == builds, done.stderr
    assert builds or "summarise" in done.stderr
