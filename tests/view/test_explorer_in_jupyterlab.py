"""The explorer in a real JupyterLab, driven by a real browser.

The widget tests call the explorer's update functions in Python; this one checks what a user sees:
JupyterLab (the ``lab`` extra) serves a notebook that displays ``passk_nb.explore`` on gpt-4o's
published τ-bench trials, headless Chromium (Debian's) opens it through playwright-core (installed
with npm into a cache folder outside the repository on first use), runs it, moves the k slider
with the keyboard, and reads the table and the curve image back from the page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from passk_nb.harness.providers.local import free_port
from tests.helpers.fake_servers import require
from tests.helpers.npm import playwright_core

ROOT = Path(__file__).resolve().parents[2]
TAU = ROOT / "data" / "tau-bench" / "tau-bench-gpt-4o-airline.json"
CHROMIUM = Path("/usr/bin/chromium")
TOKEN = "passk-explorer-test"

NOTEBOOK_CELL = f"""\
import passk_nb
df = passk_nb.from_tau_bench({str(TAU)!r}, model="gpt-4o")
passk_nb.explore(df, by=("model",), k=1, n_boot=200, static=False)
"""

# Opens the notebook, runs it, reads the explorer's state, presses the right arrow on the k
# slider's handle twice, reads it again; prints both states as one JSON line.
DRIVER = """
const { chromium } = require(process.env.PLAYWRIGHT);
(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
  const errors = [];
  page.on('pageerror', e => errors.push(String(e).slice(0, 300)));
  const step = name => console.error(new Date().toISOString() + ' ' + name);
  step('open'); await page.goto(process.env.LAB_URL);
  await page.waitForFunction(() => window.jupyterapp && document.querySelector('.jp-Notebook'),
                             null, { timeout: 120000 });
  await page.waitForTimeout(5000);  // let the session start its kernel
  step('run all'); await page.evaluate(() => window.jupyterapp.commands.execute('notebook:run-all-cells'));
  await page.waitForSelector('.jp-OutputArea-output .noUi-handle', { timeout: 240000 });
  await page.waitForSelector('.jp-OutputArea-output table', { timeout: 120000 });
  await page.waitForSelector('.jp-OutputArea-output img', { timeout: 120000 });
  const state = () => page.evaluate(() => {
    const out = document.querySelector('.jp-OutputArea-output');
    const row = [...out.querySelectorAll('table tr')].map(tr => [...tr.cells].map(c => c.innerText));
    return { header: row[0], row: row[1], img: out.querySelector('img').src,
             text: out.innerText.slice(0, 2000) };
  });
  step('read'); const before = await state();
  step('slide'); await page.focus('.jp-OutputArea-output .noUi-handle');
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowRight');
  await page.waitForFunction(() => {
    const cells = document.querySelectorAll('.jp-OutputArea-output table tr')[1].cells;
    return [...cells].some(c => c.innerText.trim() === '3');
  }, null, { timeout: 60000 });
  await page.waitForTimeout(1000);
  const after = await state();
  console.log(JSON.stringify({ before, after, errors }));
  await browser.close();
})().catch(e => { console.error('driver failed: ' + e); process.exit(1); });
"""


@pytest.fixture
def lab(tmp_path):
    """JupyterLab on 127.0.0.1 serving tmp_path (with the notebook), stopped afterwards."""
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        require(False, 'JupyterLab (pip install -e ".[lab]")')
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(NOTEBOOK_CELL)]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "explore.ipynb")
    port = free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config")}  # no user settings
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={tmp_path}",
            "--LabApp.expose_app_in_browser=True",
            "--allow-root",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "lab.log", "wb"),  # noqa: SIM115 - closed with the process
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/api/status", params={"token": TOKEN}, timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not start: {(tmp_path / 'lab.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield f"{base}/lab/tree/explore.ipynb?token={TOKEN}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.mark.slow
@pytest.mark.network_local
def test_the_explorer_in_jupyterlab_redraws_when_the_k_slider_moves(lab, tmp_path):
    require(CHROMIUM.exists(), "Debian's chromium (apt-get install chromium; .ci/run installs it)")
    driver = tmp_path / "driver.js"
    driver.write_text(DRIVER)
    env = {**os.environ, "PLAYWRIGHT": str(playwright_core()), "CHROMIUM": str(CHROMIUM), "LAB_URL": lab}
    done = subprocess.run(["node", str(driver)], env=env, capture_output=True, text=True, timeout=480)
    assert done.returncode == 0, done.stderr[-3000:] + (tmp_path / "lab.log").read_text()[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    before, after = seen["before"], seen["after"]
    assert not seen["errors"], seen["errors"]
    for state in (before, after):
        assert "Traceback" not in state["text"] and "Error" not in state["text"], state["text"]
        assert state["img"].startswith("data:image/png;base64,") or state["img"].startswith("blob:")
    columns = before["header"]
    b, a = dict(zip(columns, before["row"], strict=True)), dict(zip(columns, after["row"], strict=True))
    assert (b["model"], b["k"], a["k"]) == ("gpt-4o", "1", "3")
    # τ-bench's published pass^1 and pass^3 for gpt-4o on airline: 0.420 and 0.220
    assert (b["pass^k"], a["pass^k"]) == ("0.420", "0.220")
    assert a["trials"] == b["trials"] == "84/200 pass"
    assert after["img"] != before["img"]  # the curve's k marker moved: a new image
