"""Every code block of the README, the user guide and the methods runs: the docs cannot drift from the code.

A page's ``python`` blocks run in order in one namespace (as the cells of a notebook), ``pycon``
blocks as doctests, and each line of a ``bash`` block as a ``passk`` command (in this process),
all in a fresh folder holding the committed ``data/``. ``text`` blocks are output, a
``{toctree}`` is the site's. A block preceded by ``<!-- not run: REASON -->`` is exempt, and
:data:`NOT_RUN` lists exactly which are, and why.
"""

import doctest
import re
import shlex
from pathlib import Path

import matplotlib
import pytest

from passk_nb.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
PAGES += sorted((ROOT / "docs" / "methods").glob("*.md"))
FENCE = re.compile(
    r"(?:<!-- not run: (?P<why>[^\n]*?) -->\n)?^```(?P<info>[^\n`]*)\n(?P<code>.*?)^```[ \t]*$", re.M | re.S
)
KINDS = {"python", "pycon", "bash", "text", "{toctree}"}

#: (page, how the block's first line starts) -> why it does not run in a test: each needs something
#: a test here cannot have (a model server, a download, your own files).
NOT_RUN = {
    ("README.md", "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && passk run"): (
        "creates a virtualenv and installs from a package index (tests/cli/test_cli.py runs it in CI)"
    ),
    ("README.md", 'pip install -e ".[lab]"'): "installs JupyterLab and starts a server",
    (
        "README.md",
        'pip install -e ".[docs]"',
    ): "installs the docs extra and builds the whole site (tests/docs/ builds it)",
    ("cli.md", "passk run --provider ollama"): (
        "needs an Ollama server with llama3.1:8b, and a prices.csv of your own"
    ),
    ("explorer.md", 'pip install -e ".[lab]"'): "installs JupyterLab and starts a server",
    ("import-export.md", "passk export runs --to otel"): (
        "needs an OpenTelemetry collector on 127.0.0.1:4318 and a Harbor job folder"
    ),
    ("import-export.md", "passk import tau2-results/"): (
        "the files named are your own: τ²-bench results, inspect_ai logs, a CSV"
    ),
    ("local-model.md", 'CMAKE_ARGS="-DGGML_NATIVE=OFF'): (
        "compiles llama-cpp-python and runs a model for hours"
    ),
    ("local-model.md", "python scripts/local_model.py get"): "downloads 1.1 GB and serves a model",
    ("local-model.md", "from passk_nb.harness.providers.local import LlamaServer"): (
        "starts a llama.cpp server with the local extra built"
    ),
    ("running.md", 'df = passk_nb.run("ollama"'): "needs an Ollama server with llama3.1:8b",
    ("until.md", "passk run --provider openai"): "needs an OpenAI-compatible server serving model m",
    ("until.md", 'passk_nb.run("openai"'): "needs an OpenAI-compatible server serving model m",
}
#: pages with no block to run (their examples are output, or all need a server or a download)
NOTHING_TO_RUN = {"records.md", "example-data.md", "local-model.md", "index.md", "scaling.md", "backends.md"}
NOTHING_TO_RUN |= {
    "intervals.md",
    "comparisons.md",
    "forecast.md",
    "planning.md",
    "sequential.md",
    "error-rates.md",
}


def blocks(page: Path) -> list[tuple[str, str, str | None]]:
    """(kind, code, why it is not run or None) of every fenced block of a page, in order."""
    text = page.read_text(encoding="utf-8")
    return [(m["info"].strip(), m["code"], m["why"]) for m in FENCE.finditer(text)]


def agent(messages):
    """The `agent` / `my_function` the pages name: answers at once, without acting."""
    return '{"answer": "Done."}'


def test_every_block_says_what_it_is_and_exactly_the_listed_ones_are_exempt():
    found = {}
    for page in PAGES:
        for kind, code, why in blocks(page):
            assert kind in KINDS, f"{page.name}: a ``` block without one of {sorted(KINDS)}: {code[:60]!r}"
            if why is not None:
                keys = [k for k in NOT_RUN if k[0] == page.name and code.startswith(k[1])]
                [key] = keys or [(page.name, code)]
                assert key not in found, f"{key} names two blocks"
                found[key] = why
    assert found == NOT_RUN


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_the_pages_code_runs(page, tmp_path, monkeypatch):
    matplotlib.use("Agg")
    (tmp_path / "data").symlink_to(ROOT / "data")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    namespace: dict = {"agent": agent, "my_function": agent, "__name__": "__docs__"}
    ran = 0
    for kind, code, why in blocks(page):
        if why is not None or kind in ("text", "{toctree}"):
            continue
        ran += 1
        if kind == "python":
            exec(compile(code, str(page), "exec"), namespace)
        elif kind == "pycon":
            test = doctest.DocTestParser().get_doctest(code, namespace, page.name, str(page), 0)
            result = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS).run(test)
            assert result.failed == 0, code
        else:
            for line in code.splitlines():
                argv = shlex.split(line, comments=True)
                while argv and re.fullmatch(r"[A-Z_]+=\S*", argv[0]):  # VAR=value passk ...
                    monkeypatch.setenv(*argv.pop(0).split("=", 1))
                if not argv:
                    continue
                assert argv[0] == "passk", f"{page.name}: not a passk command: {line}"
                try:
                    status = main(argv[1:])
                except SystemExit as done:  # --version, --help
                    status = done.code
                assert status in (0, None), line
        import matplotlib.pyplot as plt

        plt.close("all")
    assert ran or page.name in NOTHING_TO_RUN, page.name
