"""The notebooks, read statically: committed clean, every figure titled and captioned, each one
drawing at least one figure and displaying at least one table.

The notebooks are executed once per CI run, by nbmake (``pytest --nbmake``, configured in
pyproject.toml), which fails on any error; this file does not execute them again. To run them by
hand: ``MPLBACKEND=Agg python -m pytest --nbmake notebooks/ -o addopts="" -p no:cacheprovider``.
"""

import ast
from pathlib import Path

import nbformat
import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
EXPECTED = [
    "01-quickstart",
    "02-capability-vs-reliability",
    "03-prompt-brittleness",
    "04-failure-modes",
    "05-rule-based-cases",
    "06-beyond-n",
    "07-diagnose",
    "08-your-own-suite",
    "09-frontier-reliability",
    "10-run-until-decided",
    "11-robustness",
    "12-a-model-we-ran",
    "13-reliability-card",
]
PLOT_FUNCTIONS = (
    "plot_curve",
    "plot_tasks",
    "plot_flips",
    "plot_outcomes",
    "plot_summary",
    "plot_forecast",
    "plot_plan",
    "plot_rank",
    "plot_divergence",
    "plot_cost",
    "plot_rounds",
    "plot_round_trials",
    "plot_robustness",
    "plot_robustness_tasks",
    "plot_card",
    "plot_calibration",
)
#: Calls whose displayed result is not a table (text, HTML transcripts, widgets, figures).
NOT_TABLES = {
    "print",
    "show_transcript",
    "compare_transcripts",
    "browse_transcripts",
    "explore",
    *PLOT_FUNCTIONS,
}


#: z values of the usual levels: a notebook that writes one builds an interval itself.
Z_VALUES = {1.645, 1.96, 2.576}
#: Calls that build an interval (scipy's ``binomtest(...).proportion_ci``, ``norm.ppf``, ``t.interval``,
#: statsmodels' ``proportion_confint``) instead of reading the one ``passk_nb.stats`` computed.
INTERVAL_CALLS = {"binomtest", "proportion_ci", "proportion_confint", "ppf", "interval"}


def builds_an_interval(tree: ast.Module) -> list[str]:
    """What in a code cell computes an interval by hand: a z value, an interval function, or a
    standard-error column (``"…_se…"``) multiplied by something."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, float)
            and round(node.value, 3) in Z_VALUES
        ):
            found.append(f"the z value {node.value}")
        if (name := called_name(node)) in INTERVAL_CALLS:
            found.append(f"{name}(...)")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for side in (node.left, node.right):
                if isinstance(side, ast.Subscript) and isinstance(side.slice, ast.Constant):
                    if "_se" in str(side.slice.value):
                        found.append(f"a multiple of {side.slice.value!r}")
    return found


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def code_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def parse(source: str) -> ast.Module:
    """A code cell as Python: IPython magics (``%matplotlib inline``) become comments."""
    lines = ["# " + line if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    return ast.parse("\n".join(lines))


def called_name(node: ast.AST) -> str | None:
    """``f`` for ``f(...)`` and ``mod.f(...)``; None for anything that is not a call."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def calls_in(tree: ast.AST) -> set[str]:
    return {name for node in ast.walk(tree) if (name := called_name(node))}


def shows_a_table(tree: ast.Module) -> bool:
    """The cell ends with a bare expression Jupyter displays (a frame, not text or a figure), or
    calls ``display`` on something that is not a transcript."""
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Expr) and not isinstance(last.value, ast.Constant):
        if called_name(last.value) not in NOT_TABLES | {"display"}:
            return True
    for node in ast.walk(tree):
        if called_name(node) == "display" and isinstance(node, ast.Call) and node.args:
            if called_name(node.args[0]) not in NOT_TABLES:
                return True
    return False


def test_the_notebooks_exist():
    assert [path.stem for path in NOTEBOOKS] == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_clean_and_captions_every_figure(path):
    nb = read(path)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = code_cells(nb)
    assert all(not cell.outputs and cell.execution_count is None for cell in code), "clear the outputs"
    # inline figures even when MPLBACKEND=Agg is set (as in .ci/run)
    assert code[0].source.startswith("%matplotlib inline")
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and calls_in(parse(cell.source)) & set(PLOT_FUNCTIONS):
            after = nb.cells[i + 1] if i + 1 < len(nb.cells) else None
            assert after is not None and after.cell_type == "markdown", f"cell {i}: caption the figure"
            assert after.source.startswith("*What to see:*"), f"cell {i}: say what to see in the figure"
            assert "title=" in cell.source, f"cell {i}: give the figure a title"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_draws_a_figure_and_displays_a_table(path):
    trees = [parse(cell.source) for cell in code_cells(read(path))]
    plotted = set().union(*(calls_in(tree) for tree in trees)) & set(PLOT_FUNCTIONS)
    assert plotted, f"{path.name} calls none of {', '.join(PLOT_FUNCTIONS)}"
    assert any(shows_a_table(tree) for tree in trees), f"{path.name} displays no table"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_interval_a_notebook_shows_comes_from_passk_nb_stats(path):
    """No ``estimate ± 1.96 · se`` and no scipy interval: the notebooks read the ``*_lo``/``*_hi`` and
    ``*_fixed_lo``/``*_fixed_hi`` columns, so a notebook's interval is the one the library reports."""
    for i, cell in enumerate(read(path).cells):
        if cell.cell_type == "code":
            assert not (found := builds_an_interval(parse(cell.source))), f"cell {i}: {', '.join(found)}"


def test_the_interval_check_finds_hand_made_intervals():
    assert sorted(builds_an_interval(parse('half = 1.96 * r["pass^k_se_fixed"]'))) == [
        "a multiple of 'pass^k_se_fixed'",
        "the z value 1.96",
    ]
    assert builds_an_interval(parse('d = 2 * df["pass@k_se_fixed"]')) == ["a multiple of 'pass@k_se_fixed'"]
    assert sorted(
        builds_an_interval(parse("hi = binomtest(0, 8).proportion_ci(confidence_level=0.95).high"))
    ) == [
        "binomtest(...)",
        "proportion_ci(...)",
    ]
    assert builds_an_interval(parse("z = norm.ppf(0.975)")) == ["ppf(...)"]
    assert not builds_an_interval(parse('s = passk_nb.summarize(df, k=2)\ns[["pass^k_lo", "pass^k_hi"]]'))
    assert not builds_an_interval(parse('width = r["pass^k_fixed_hi"] - r["pass^k_fixed_lo"]'))


def test_the_static_checks_tell_tables_from_text_and_figures():
    assert shows_a_table(parse('df.groupby("task").size().reset_index()'))
    assert shows_a_table(parse("table = flips(df)\ntable"))
    assert shows_a_table(parse("display(summary)"))
    assert not shows_a_table(parse('print("0 of 280 trials passed")'))
    assert not shows_a_table(parse('ax = plot_curve(df, title="t")'))
    assert not shows_a_table(parse("passk_nb.view.show_transcript(df)"))
    assert not shows_a_table(parse("display(passk_nb.view.show_transcript(df, row=3))"))
    assert calls_in(parse("%matplotlib inline\nax = passk_nb.view.plot_flips(df)")) >= {"plot_flips"}


@pytest.mark.parametrize(
    "path", [p for p in NOTEBOOKS if p.stem[:2] in {"02", "03", "04"}], ids=lambda p: p.stem
)
def test_analysis_notebooks_use_the_public_api(path):
    """Notebooks 02-04 import only ``passk_nb`` itself, so moving a module does not break them."""
    for cell in code_cells(read(path)):
        for node in ast.walk(parse(cell.source)):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("passk_nb"), (
                    f"{path.name}: from {node.module} import"
                )
            if isinstance(node, ast.Import):
                assert all(
                    alias.name == "passk_nb" or not alias.name.startswith("passk_nb") for alias in node.names
                )
