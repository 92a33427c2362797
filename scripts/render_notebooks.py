"""Execute the notebooks once and commit the copies with their outputs as the site's tutorials.

``notebooks/*.ipynb`` are committed clean (``tests/test_notebooks.py``) and nbmake executes them
in CI; the documentation build never executes anything. This script runs each notebook as nbmake
does (working directory ``notebooks/``) and writes it, outputs included, to
``docs/tutorials/<name>.ipynb``, which the site renders. Widget views are dropped (a static page
has no kernel): each widget output keeps its static picture, as a notebook viewer shows it.

    python scripts/render_notebooks.py            # execute all, write docs/tutorials/
    python scripts/render_notebooks.py 06-beyond-n   # only these
    python scripts/render_notebooks.py --check    # the copies match the notebooks' code; exit 1 if not
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TUTORIALS = ROOT / "docs" / "tutorials"
WIDGET = "application/vnd.jupyter.widget-view+json"


def sources(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """Each cell's type and source: what a copy must share with its notebook."""
    return [(cell.cell_type, cell.source) for cell in nb.cells]


def problems(name: str) -> list[str]:
    """What is wrong with the rendered copy of ``notebooks/<name>.ipynb`` (empty when it is current)."""
    copy = TUTORIALS / f"{name}.ipynb"
    shown = copy.relative_to(ROOT) if copy.is_relative_to(ROOT) else copy
    if not copy.exists():
        return [f"{shown} is missing"]
    nb = nbformat.read(copy, as_version=4)
    found = []
    if sources(nb) != sources(nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)):
        found.append(f"{shown}: its cells differ from notebooks/{name}.ipynb")
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    if any(cell.execution_count is None for cell in code) or not any(cell.outputs for cell in code):
        found.append(f"{shown}: not executed (cells without outputs)")
    if any(out.output_type == "error" for cell in code for out in cell.outputs):
        found.append(f"{shown}: a cell raised an error")
    return found


def render(name: str) -> None:
    """Execute ``notebooks/<name>.ipynb`` in ``notebooks/`` and write the copy with its outputs."""
    import nbclient

    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            out.get("data", {}).pop(WIDGET, None)
    nb.metadata.pop("widgets", None)
    TUTORIALS.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, TUTORIALS / f"{name}.ipynb")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook names without .ipynb (default: all)")
    parser.add_argument("--check", action="store_true", help="check the copies instead of writing them")
    args = parser.parse_args(argv)
    names = args.names or sorted(path.stem for path in NOTEBOOKS.glob("*.ipynb"))
    if args.check:
        found = [problem for name in names for problem in problems(name)]
        stale = sorted({p.stem for p in TUTORIALS.glob("*.ipynb")} - set(names)) if not args.names else []
        found += [f"docs/tutorials/{name}.ipynb has no notebook in notebooks/" for name in stale]
        print("\n".join(found) or "the tutorials are current")
        if found:
            print("regenerate them: python scripts/render_notebooks.py [NAME ...]", file=sys.stderr)
        return 1 if found else 0
    os.environ.setdefault("MPLBACKEND", "Agg")
    for name in names:
        print(f"executing {name}", flush=True)
        render(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
