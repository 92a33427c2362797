"""The documentation site, built once per test session the way docs/README.md says, strictly."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.fake_servers import require

ROOT = Path(__file__).resolve().parents[2]
#: docs/README.md's command, with the output folder and the doctrees put where the test says.
BUILD = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-E", "-b", "html"]


def require_docs_extra() -> None:
    """Skip without the docs extra, or fail under PASSK_REQUIRE_ALL (``.ci/run`` installs it)."""
    missing = [m for m in ("sphinx", "myst_nb", "pydata_sphinx_theme") if importlib.util.find_spec(m) is None]
    require(not missing, f'the docs extra (pip install -e ".[docs]"; missing {", ".join(missing)})')


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built site's folder (``index.html`` at its top); the build's warnings fail the test."""
    require_docs_extra()
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [*BUILD, "-d", str(out / ".doctrees"), str(ROOT / "docs"), str(out / "html")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, f"the strict docs build failed:\n{done.stderr[-6000:]}"
    return out / "html"
