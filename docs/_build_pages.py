"""The site's generated pages and its strict checks, wired into Sphinx by ``docs/conf.py``.

- ``reference/api/<face>.rst``: every public name of each package face (its ``__all__``), in the
  face's order; an object shown on two faces is documented once, at the first, and named there
  by the other. A public name without a docstring is a build warning (an error under ``-W``).
- ``reference/cli.md``: ``passk --help`` and ``passk COMMAND --help`` of every command.
- ``_generated/frontier.png``: the landing page's figure, drawn from committed data.
- A tutorial copy that is missing, not executed, or whose cells differ from its notebook is a
  build warning (``scripts/render_notebooks.py``).
- :func:`resolve_reference`: a reference to any passk_nb name resolves to the page documenting
  that object, under whichever name it was written (``passk_nb.summarize``,
  ``passk_nb.stats.summary.summarize``); one to an object that exists but is not on the site
  (an internal function, ``pandas.DataFrame``) is shown as text; one to a name that exists
  nowhere stays a warning, so a renamed function breaks the build.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import inspect
import os
import re
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from sphinx.util import logging
from sphinx.util.nodes import make_refnode

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
API = DOCS / "reference" / "api"
GENERATED = DOCS / "_generated"
logger = logging.getLogger("passk_nb.docs")

#: The package's faces, in the order the reference shows them, each with what it is for.
FACES = {
    "passk_nb": "The verbs a notebook calls, each documented on its layer's page below.",
    "passk_nb.data": "The trial records and the parquet folders they live in.",
    "passk_nb.stats": "Numbers from trials: pass@k, pass^k, their intervals, comparisons, plans.",
    "passk_nb.view": "Tables, plots and widgets of what ``passk_nb.stats`` returns.",
    "passk_nb.harness": "Running trials: a suite's tasks against a backend, one record per trial.",
    "passk_nb.harness.providers": "The chat backends, and turning a function into one.",
    "passk_nb.harness.suites": "Task suites and every name you write one with.",
    "passk_nb.importers": "Other runners' results as passk records.",
    "passk_nb.exporters": "Records written in other tools' formats.",
}
#: Short names the annotations use for modules (``pd.DataFrame``).
ALIASES = {"pd": "pandas", "np": "numpy", "plt": "matplotlib.pyplot", "npt": "numpy.typing"}

#: id(object) -> the name it is documented under; the modules each page's objects come from.
DOCUMENTED: dict[int, str] = {}
PAGE_MODULES: dict[str, set[str]] = {}


def write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` unless ``path`` holds it already, so Sphinx rereads only what changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring, for the summary tables."""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    sentence = re.match(r"(.+?[.;:!?])(\s|$)", paragraph)
    return sentence.group(1) if sentence else paragraph


#: ``name: text`` opening a line of a docstring's parameter paragraph (``on, a, b:``, ``**options:``).
PARAMETER = re.compile(r"^((?:\*{0,2}[a-z_]\w*)(?:, [a-z_]\w*)*): (.*)$")


def parameter_fields(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """The docstrings' parameter paragraphs (``name: text``, continued by indented lines) as reST
    field lists, so they render as a table and not as a broken definition list: a function's
    as its parameters (``:param name:``), a class's as fields (its attributes or options)."""
    out: list[str] = []
    start = 0
    for end in [*(i for i, line in enumerate(lines) if not line.strip()), len(lines)]:
        paragraph = lines[start:end]
        if (
            paragraph
            and all(PARAMETER.match(line) or line.startswith("    ") for line in paragraph)
            and (PARAMETER.match(paragraph[0]))
        ):
            for line in paragraph:
                found = PARAMETER.match(line)
                if found is None:
                    out.append(line)
                    continue
                names, text = found.groups()
                single = what in ("function", "method") and "," not in names  # Sphinx's "Parameters"
                out.append(f":param {names}: {text}" if single else f":{names}: {text}")
        else:
            out.extend(paragraph)
        if end < len(lines):
            out.append(lines[end])
        start = end + 1
    lines[:] = out


def attribute_doc(face: ModuleType, name: str) -> str:
    """The ``#:`` comment of a data name, from the module that defines it (the face's map says which)."""
    from sphinx.pycode import ModuleAnalyzer

    where = getattr(face, "_NAMES", getattr(face, "_LAZY", {})).get(name)
    obj = getattr(face, name)
    modules = [where] if where else [face.__name__]
    modules += sorted(  # a name the face imports: the submodule that holds the same object
        m
        for m, module in list(sys.modules.items())
        if m.startswith(f"{face.__name__}.") and getattr(module, name, None) is obj
    )
    for module in modules:
        doc = "\n".join(ModuleAnalyzer.for_module(module).find_attr_docs().get(("", name), [])).strip()
        if doc:
            return doc
    return ""


def entry(face: ModuleType, name: str) -> tuple[str, str]:
    """The reST of one public name, and its docstring (empty when it has none)."""
    obj = getattr(face, name)
    full = f"{face.__name__}.{name}"
    alias = typing.get_origin(obj) is not None  # Message = dict[str, Any]: documented as data
    if isinstance(obj, type) and not alias:
        kind = "autoexception" if issubclass(obj, BaseException) else "autoclass"
        return f".. {kind}:: {full}\n   :members:\n", inspect.getdoc(obj) or ""
    if callable(obj) and not alias:
        return f".. autofunction:: {full}\n", inspect.getdoc(obj) or ""
    doc = attribute_doc(face, name)
    body = "\n".join(f"   {line}" if line else "" for line in doc.splitlines())
    return f".. py:data:: {name}\n   :module: {face.__name__}\n\n{body}\n", doc


def face_page(name: str) -> str:
    """The reST page of one face: its docstring, a table of its names, then each name's entry."""
    face = importlib.import_module(name)
    title = f"``{name}``"
    lines = [title, "=" * len(title), "", FACES[name], "", f".. automodule:: {name}", ""]
    rows, entries = [], []
    modules = PAGE_MODULES.setdefault(f"reference/api/{name}", set())
    for public in face.__all__:
        if public.startswith("__"):  # __version__: said in the text, not a reference entry
            continue
        obj = getattr(face, public)
        full = f"{name}.{public}"
        seen = DOCUMENTED.get(id(obj))
        modules.add(getattr(obj, "__module__", None) or name)
        text, doc = entry(face, public)
        rows.append((f":py:obj:`{public} <{seen or full}>`", first_sentence(doc)))
        if seen is not None:
            entries.append(f"``{public}``\n   the same object as :py:obj:`{seen}`.\n")
            continue
        if not doc:
            logger.warning(f"{full} is public (in {name}.__all__) but has no docstring", type="passk")
        DOCUMENTED[id(obj)] = full
        entries.append(text)
    lines += [".. list-table::", "   :widths: 30 70", ""]
    for ref, summary in rows:
        lines += [f"   * - {ref}", f"     - {summary}" if summary else "     -"]
    lines.append("")
    if name == "passk_nb":  # the top level only points at the faces, which document each name
        return "\n".join(lines) + "\n"
    return "\n".join(lines + ["", *entries]) + "\n"


def api_pages() -> None:
    """Write ``reference/api/<face>.rst`` for every face, the top level last (it links the rest)."""
    DOCUMENTED.clear()
    PAGE_MODULES.clear()
    order = [*list(FACES)[1:], "passk_nb"]
    pages = {name: face_page(name) for name in order}
    for name, text in pages.items():
        write_if_changed(API / f"{name}.rst", text)
    for stale in set(API.glob("*.rst")) - {API / f"{name}.rst" for name in FACES}:
        stale.unlink()


def cli_page() -> None:
    """Write ``reference/cli.md``: the help of ``passk`` and of every command, as the terminal shows it."""
    from passk_nb.cli.main import build_parser, subcommands

    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "80"  # a terminal's width, and the page's column
    try:
        parser = build_parser()
        parts = [
            "# Command line",
            "",
            "Every `passk` command and what it takes, exactly as `passk COMMAND --help` prints it.",
            "",
            "```text",
            parser.format_help().rstrip(),
            "```",
        ]
        for command, sub in subcommands(parser).items():
            parts += ["", f"(cli-{command})=", f"## passk {command}", "", "```text"]
            parts += [sub.format_help().rstrip(), "```"]
    finally:
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns
    write_if_changed(DOCS / "reference" / "cli.md", "\n".join(parts) + "\n")


def landing_figure() -> None:
    """Draw ``_generated/frontier.png`` (notebook 09's figure) from the committed LiveCodeBench counts."""
    target = GENERATED / "frontier.png"
    source = ROOT / "data" / "livecodebench" / "counts.parquet"
    if target.exists() and target.stat().st_mtime > source.stat().st_mtime:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    import passk_nb
    import passk_nb.view

    counts = pd.read_parquet(source)
    chat = counts[counts["n"] == 10].reset_index(drop=True)
    values = passk_nb.curve(chat, by="model", seed=0)
    last = values[(values["metric"] == "pass^k") & (values["k"] == 10)].sort_values("value", ascending=False)
    values["model"] = pd.Categorical(values["model"], categories=last["model"], ordered=True)
    fig, ax = plt.subplots(figsize=(9, 5.5))
    passk_nb.view.plot_curve(
        values.sort_values(["model", "k"]),
        metrics=("pass^k",),
        ax=ax,
        title="pass^k against k, 13 models: LiveCodeBench, 880 problems, 10 samples each",
    )
    GENERATED.mkdir(exist_ok=True)
    fig.savefig(target, dpi=100, bbox_inches="tight")
    plt.close(fig)


def check_tutorials() -> None:
    """Warn about each tutorial copy that is missing, unexecuted or out of step with its notebook."""
    script = ROOT / "scripts" / "render_notebooks.py"
    spec = importlib.util.spec_from_file_location("render_notebooks", script)
    assert spec is not None and spec.loader is not None
    render = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(render)
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for problem in render.problems(path.stem):
            logger.warning(f"{problem}: run python scripts/render_notebooks.py {path.stem}", type="passk")


def generate(app: Any, config: Any) -> None:
    """Every generated page and check, before Sphinx reads the sources."""
    api_pages()
    cli_page()
    landing_figure()
    check_tutorials()


def locate(name: str) -> tuple[bool, Any]:
    """(found, object) for a dotted name: the longest importable module prefix, then attributes."""
    parts = name.split(".")
    if parts[0] in ALIASES:
        parts[:1] = ALIASES[parts[0]].split(".")
    if len(parts) == 1 and hasattr(builtins, parts[0]):
        return True, getattr(builtins, parts[0])
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except Exception:  # noqa: BLE001 - not a module (or not importable): try a shorter prefix
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False, None
        return True, obj
    return False, None


def candidates(node: Any) -> Iterator[str]:
    """The names a reference may mean: as written, then relative to its module, class and page."""
    target = node["reftarget"].lstrip(".~")
    yield target
    module, cls = node.get("py:module"), node.get("py:class")
    if module and cls:
        yield f"{module}.{cls}.{target}"
    if module:
        yield f"{module}.{target}"
    for source in sorted(PAGE_MODULES.get(node.get("refdoc", ""), ())):
        yield f"{source}.{target}"


def resolve_reference(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """Sphinx's ``missing-reference``: see the module docstring."""
    if node.get("refdomain") != "py":
        return None
    objects = env.get_domain("py").objects
    for name in candidates(node):
        found, obj = locate(name)
        if not found:
            owner, _, member = name.rpartition(".")
            found, obj = locate(owner)
            documented = DOCUMENTED.get(id(obj)) if found else None
            fields = getattr(obj, "__dataclass_fields__", {}) if found else {}
            if documented in objects and member in fields:  # a dataclass field: its class's entry
                key = f"{documented}.{member}" if f"{documented}.{member}" in objects else documented
                target = objects[key]
                return make_refnode(app.builder, node["refdoc"], target.docname, target.node_id, contnode)
            continue
        documented = DOCUMENTED.get(id(obj))
        if documented is None:
            return contnode
        if documented not in objects:  # on the reference, but registered under another name
            logger.warning(f"{documented} has no entry of that name", location=node, type="passk")
            return None
        target = objects[documented]
        return make_refnode(app.builder, node["refdoc"], target.docname, target.node_id, contnode)
    return None


def setup(app: Any) -> None:
    app.connect("config-inited", generate)
    app.connect("missing-reference", resolve_reference)
    app.connect("autodoc-process-docstring", parameter_fields)
