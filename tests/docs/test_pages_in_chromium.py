"""The built site in Debian's headless Chromium: the landing page, a tutorial with its figures, the
API entry of ``summarize`` and the command line page render, load every image and log no error.

Screenshots go to ``$PASSK_ARTIFACTS_DIR/docs`` (``.ci/run`` sets it to ``artifacts/``, for CI to
keep), else to the test's temporary folder.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import nbformat
import pytest

from tests.docs.conftest import ROOT
from tests.helpers.fake_servers import require
from tests.helpers.npm import playwright_core

CHROMIUM = Path("/usr/bin/chromium")
TUTORIAL = "09-frontier-reliability"

# Opens each page, refusing every request that is not a local file, and prints one JSON line:
# per page its title, first heading, images (loaded or not), the article's text, whether the #anchor exists,
# and every console error, uncaught exception and refused or failed request.
DRIVER = """
const { chromium } = require(process.env.PLAYWRIGHT);
(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
  const seen = [];
  for (const { url, shot } of JSON.parse(process.env.PAGES)) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const errors = [];
    page.on('console', m => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
    page.on('pageerror', e => errors.push('exception: ' + String(e).slice(0, 300)));
    page.on('requestfailed', r => errors.push('failed: ' + r.url()));
    await page.route(u => !/^(file|data|blob):/.test(u.href), r => {
      errors.push('network: ' + r.request().url()); r.abort(); });
    await page.goto(url, { waitUntil: 'load', timeout: 120000 });
    await page.waitForTimeout(500);
    const info = await page.evaluate(() => ({
      title: document.title,
      h1: (document.querySelector('h1') || {}).innerText || '',
      images: [...document.images].map(i => ({ src: i.getAttribute('src'),
        loaded: i.complete && i.naturalWidth > 0, width: i.getBoundingClientRect().width })),
      text: (document.querySelector('article') || document.body).innerText.slice(0, 50000),
      anchor: location.hash ? !!document.getElementById(decodeURIComponent(location.hash.slice(1))) : null,
    }));
    await page.evaluate(() => {  // a tutorial's screenshot shows its first figure
      const figure = document.querySelector('.cell_output img'); if (figure) figure.scrollIntoView(); });
    await page.screenshot({ path: shot, fullPage: false });
    seen.push({ ...info, errors });
    await page.close();
  }
  console.log(JSON.stringify(seen));
  await browser.close();
})().catch(e => { console.error('driver failed: ' + e); process.exit(1); });
"""


def artifacts(tmp_path: Path) -> Path:
    """Where the screenshots go: ``$PASSK_ARTIFACTS_DIR/docs`` when set (CI), else ``tmp_path``."""
    root = os.environ.get("PASSK_ARTIFACTS_DIR")
    folder = Path(root) / "docs" if root else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.slow
def test_the_main_pages_render_in_chromium_without_errors(site, tmp_path):
    require(CHROMIUM.exists(), "Debian's chromium (apt-get install chromium; .ci/run installs it)")
    shots = artifacts(tmp_path)
    wanted = {
        "landing": "index.html",
        "tutorial": f"tutorials/{TUTORIAL}.html",
        "summarize": "reference/api/passk_nb.stats.html#passk_nb.stats.summarize",
        "cli": "reference/cli.html",
    }
    pages = [
        {"url": (site / path).as_uri().replace("%23", "#"), "shot": str(shots / f"{name}.png")}
        for name, path in wanted.items()
    ]
    done = subprocess.run(
        ["node", "-e", DRIVER],
        env={
            **os.environ,
            "PLAYWRIGHT": str(playwright_core()),
            "CHROMIUM": str(CHROMIUM),
            "PAGES": json.dumps(pages),
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    landing, tutorial, summarize, cli = json.loads(done.stdout.strip().splitlines()[-1])
    for name, page in zip(wanted, (landing, tutorial, summarize, cli), strict=True):
        assert page["errors"] == [], (name, page["errors"])
        assert all(image["loaded"] for image in page["images"]), (name, page["images"])
        assert (shots / f"{name}.png").stat().st_size > 10_000, name

    assert landing["h1"].startswith("passk-nb")
    text = landing["text"]  # what it is for first, then a result, then the explaining
    assert (
        text.index("measures how reliably") < text.index("Thirteen models") < text.index("A single success")
    )
    assert any(i["src"].endswith("frontier.png") and i["width"] > 500 for i in landing["images"])

    executed = nbformat.read(ROOT / "docs" / "tutorials" / f"{TUTORIAL}.ipynb", as_version=4)
    figures = sum(
        "image/png" in out.get("data", {}) for cell in executed.cells for out in cell.get("outputs", [])
    )
    assert figures >= 3 and len([i for i in tutorial["images"] if i["width"] > 300]) >= figures
    assert tutorial["h1"].startswith("09")

    assert summarize["anchor"] is True and "summarize(" in summarize["text"]
    assert "pass@k and pass^k with both intervals" in summarize["text"]
    assert "passk run" in cli["text"] and "--trials" in cli["text"] and "usage: passk" in cli["text"]
