"""npm packages the tests run (the real claude CLI, playwright-core), installed into a cache folder
outside the repository on first use."""

from __future__ import annotations

import json
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


#: The playwright-core the browser tests drive Debian's chromium with (no browser download).
PLAYWRIGHT_VERSION = "1.65.1"


def playwright_core() -> Path:
    """playwright-core's package folder, installed with npm into the cache on first use."""
    require(shutil.which("node") is not None, "node")
    cache = CACHE_ROOT / "playwright-core"
    package = cache / "node_modules" / "playwright-core"
    manifest = package / "package.json"
    if not (manifest.exists() and json.loads(manifest.read_text())["version"] == PLAYWRIGHT_VERSION):
        npm_install(cache, "playwright-core", PLAYWRIGHT_VERSION)
    return package
