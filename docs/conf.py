"""Sphinx configuration of the passk-nb site (docs/README.md says how to build it).

At build start it writes the generated pages into gitignored folders: the API reference of every
public name, face by face (``reference/api/``), the ``passk COMMAND --help`` of every command
(``reference/cli.md``) and the landing page's figure (``_generated/``). Nothing is executed but
that: the tutorials are the notebooks' committed, executed copies (``tutorials/*.ipynb``).
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))
sys.path.insert(0, str(DOCS))

import _build_pages  # noqa: E402  (docs/_build_pages.py, beside this file)

from passk_nb import __version__  # noqa: E402

project = "passk-nb"
author = "the passk-nb authors"
copyright = "the passk-nb authors"  # noqa: A001  (Sphinx's name)
release = version = __version__

extensions = ["myst_nb", "sphinx.ext.autodoc"]
exclude_patterns = ["_build", "README.md", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]

# MyST: fenced directives (```{toctree}), ::: blocks, definition lists, heading anchors for
# [text](page.md#heading) links. No math: MathJax would load from a CDN, and the site works offline.
myst_enable_extensions = ["colon_fence", "deflist", "fieldlist", "attrs_inline"]
myst_heading_anchors = 3

# Notebooks are rendered from their committed outputs, never executed here.
nb_execution_mode = "off"
nb_execution_raise_on_error = True
nb_merge_streams = True

# Strict: every cross-reference must resolve (nitpicky; `python -m sphinx -W -n`), see
# _build_pages.resolve_reference for what a reference to a passk_nb name resolves to.
nitpicky = True
# Sphinx's signature parser splits ``Callable[[dict[str, Any]], None]`` at the inner comma and
# asks for a class named "dict[str": an artefact of the parser, not a reference in our text.
nitpick_ignore = [("py:class", "dict[str")]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = False  # the values (0.95), not the constants (CI)
autodoc_default_options = {"members": False}

html_theme = "pydata_sphinx_theme"
html_title = "passk-nb"
html_static_path: list[str] = []
html_show_sourcelink = False
html_copy_source = False
# The theme's light/dark switch starts from this mode (left empty, its script logs an error).
html_context = {"default_mode": "auto"}
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    "secondary_sidebar_items": ["page-toc"],
}


def setup(app):  # noqa: ANN001, ANN201  (Sphinx's extension hook)
    _build_pages.setup(app)
    return {"parallel_read_safe": True}
