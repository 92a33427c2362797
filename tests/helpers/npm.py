"""npm packages the tests run (the real claude CLI, playwright-core), installed into a cache folder
outside the repository on first use."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.helpers.fake_servers import require

#: Where npm packages go: ``$PASSK_CACHE_DIR`` or ``~/.cache/passk-nb``, one folder per package.
CACHE_ROOT = Path(os.environ.get("PASSK_CACHE_DIR", Path.home() / ".cache" / "passk-nb"))


def npm_install(folder: Path, package: str, version: str) -> None:
    """``npm install package@version`` into ``folder`` (skips or fails the test without npm)."""
    require(shutil.which("npm") is not None, "npm")
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "npm",
            "install",
            "--prefix",
            str(folder),
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            f"{package}@{version}",
        ],
        check=True,
        timeout=600,
    )
