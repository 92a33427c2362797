"""The HTML report at 1, 2, 12 and 40 configurations: a key per configuration that every figure
uses, small multiples for the curve, a heatmap that grows with its rows, failures of every
configuration, and figures that headless Chromium renders at a readable size."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from passk_nb.data.records import frame_from_records
from passk_nb.data.store import load
from passk_nb.stats.params import default_by
from passk_nb.stats.report import report_frame
from passk_nb.stats.summary import best_first
from passk_nb.view import report_html as report_html_module
from passk_nb.view.report_html import _curves, config_keys, report_html
from passk_nb.view.tables import row_fields
from tests.helpers.fake_servers import require

ROOT = Path(__file__).resolve().parents[2]
SUITE_12 = ROOT / "data" / "smollm2-suite"  # 12 configurations of SmolLM2-135M (prompt × json × T)
CHROMIUM = Path("/usr/bin/chromium")

# Appended to a copy of the page (the report itself has no script): the rendered and the natural
# size of every figure, written into the page for --dump-dom to read.
MEASURE = """<script>window.addEventListener('load', () => {
  const sizes = [...document.images].map(i => { const r = i.getBoundingClientRect();
    return {alt: i.alt, natural: [i.naturalWidth, i.naturalHeight], shown: [r.width, r.height]}; });
  const pre = document.createElement('pre'); pre.id = 'sizes'; pre.textContent = JSON.stringify(sizes);
  document.body.appendChild(pre); });</script>"""


def configurations(count: int, *, tasks: int = 5, trials: int = 4, seed: int = 0) -> pd.DataFrame:
    """``count`` models on the same tasks; the first fails most, so sorting would show only its failures."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(count):
        for t in range(tasks):
            p = 0.1 if m == 0 else rng.beta(2, 1)
            for i in range(trials):
                ok = bool(rng.random() < p)
                rows.append(
                    {
                        "run_id": f"r{m}",
                        "suite": "s",
                        "task": f"task-{t}",
                        "trial": i,
                        "model": f"model-{m:02d}",
                        "passed": ok,
                        "outcome": "pass" if ok else "format_error",
                        "error": None if ok else f"reply {m}-{t}-{i} was not JSON",
                    }
                )
    return frame_from_records(rows)


def rendered_sizes(page: str, tmp_path: Path, script: str = MEASURE, width: int = 1280) -> list[dict]:
    require(CHROMIUM.exists(), "Debian's chromium (apt-get install chromium; .ci/run installs it)")
    path = tmp_path / "measured.html"
    path.write_text(page.replace("</body>", script + "</body>"))
    dom = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--window-size={width},2000",
            "--virtual-time-budget=10000",
            "--dump-dom",
            path.as_uri(),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    found = re.search(r'<pre id="sizes">(.*?)</pre>', dom, re.S)
    assert found, "the measuring script did not run"
    return json.loads(found.group(1).replace("&quot;", '"'))


@pytest.mark.parametrize("count", [2, 12])
def test_figures_render_at_a_readable_size_in_chromium(count, tmp_path):
    df = load(SUITE_12) if count == 12 else configurations(2)
    assert df.groupby(["prompt_hash", "config"] if count == 12 else "model").ngroups == count
    sizes = rendered_sizes(report_html(df, k=2, n_boot=100), tmp_path)
    assert len(sizes) == 4  # overview, curve, heatmap, outcomes
    for figure in sizes:
        (natural_w, _), (shown_w, shown_h) = figure["natural"], figure["shown"]
        assert natural_w > 0 and shown_h > 150, figure
        # Not shrunk to fit: the text is drawn at (nearly) the size matplotlib gave it.
        assert shown_w / natural_w >= 0.8, figure
    plt.close("all")


@pytest.mark.parametrize("count", [1, 2, 12, 40])
def test_every_curve_panel_is_wide_enough_to_read(count):
    df = configurations(count)
    report = df.groupby("model", as_index=False).size()
    keys, names, labelled = config_keys(df, report, ["model"])
    ax = _curves(
        df.assign(configuration=labelled.to_numpy()), names, k=2, ci=0.95, n_boot=0, seed=0, infra="exclude"
    )
    figure = ax.figure
    figure.canvas.draw()
    panels = [a for a in figure.axes if a.get_visible() and a.get_lines()]
    assert len(panels) == count
    widths = [a.get_window_extent().width * 100 / figure.dpi for a in panels]  # pixels at the page's 100 dpi
    assert min(widths) >= 180, widths
    assert figure.get_size_inches()[0] <= 12.5  # fits the page without shrinking
    if count > 1:
        assert [a.get_title(loc="left") for a in panels] == names
        assert len(set(names)) == count and keys[:2] == ["A", "B"]
    plt.close("all")


def test_forty_configurations_get_keys_past_z():
    df = configurations(40, tasks=2, trials=2)
    keys, names, labels = config_keys(df, df.groupby("model", as_index=False).size(), ["model"])
    assert keys[25:28] == ["Z", "AA", "AB"] and len(set(keys)) == 40
    assert names == [f"{key}: model-{i:02d}" for i, key in enumerate(keys)]  # short: key and model
    assert set(labels) == set(names)


def test_the_heatmap_grows_down_with_its_configurations():
    page = report_html(configurations(40, tasks=3, trials=2), k=1, n_boot=0)
    sizes = [tuple(map(int, m)) for m in re.findall(r"data-size='(\d+)x(\d+)'", page)]
    assert sizes, "figures carry their natural size"
    heatmap = sizes[1]
    assert heatmap[1] > 1.5 * heatmap[0]  # 40 rows of configurations, 3 columns of tasks


def test_failures_of_every_configuration_are_shown_with_outcome_and_reason():
    df = configurations(3, trials=6)
    failed = df[~df["passed"]]
    assert (failed["model"] == "model-00").sum() >= 25  # the first 25 by model were all its own
    page = report_html(df, k=2, n_boot=0, max_failures=9)
    sections = re.split(r"<h3>", page.split("<h2>Failed trials</h2>")[1])[1:]
    assert len(sections) == 3
    for key, model, section in zip("ABC", ["model-00", "model-01", "model-02"], sections, strict=True):
        assert section.startswith(key)
        summaries = re.findall(r"<summary>(.*?)</summary>", section)
        assert len(summaries) == min(3, (failed["model"] == model).sum())
        assert all("format_error" in s and model in s and "was not JSON" in s for s in summaries)


def test_an_agent_reads_by_its_name_and_a_shared_name_by_its_short_fingerprint():
    frame = pd.DataFrame(
        {
            "model": ["careful", "hasty", "hasty"],
            "config": [
                "agent=180a577b6038, max_turns=6",
                "agent=8cdb6adf1960, max_turns=6",
                "agent=81982f96c347, max_turns=6",
            ],
        }
    )
    fields = row_fields(frame, ["model", "config"])
    assert fields["config"].tolist() == ["default", "agent=8cdb6ad", "agent=81982f9"]
    assert fields["config, every row"].iloc[0] == "max_turns=6"
    two = row_fields(frame.iloc[:2], ["model", "config"])
    assert "config" not in two  # the names tell the two agents apart
    assert "agent=" not in " ".join(" ".join(v) for v in two.values())


@pytest.mark.parametrize(
    ("column", "value", "said"),
    [
        ("transcript", "[" * 100_000 + "]" * 100_000, "unreadable transcript: nested too deep to read"),
        ("state_diff", "[" * 100_000 + "]" * 100_000, "unreadable state diff: nested too deep to read"),
        ("state_diff", "5", "unreadable state diff: not a list of changes"),
        ("state_diff", '[1, "a"]', "unreadable state diff: not a list of changes"),
    ],
    ids=["deep-transcript", "deep-diff", "number-diff", "junk-diff"],
)
def test_a_failed_trial_with_an_unreadable_transcript_or_diff_is_said_not_a_crash(
    column: str, value: str, said: str
) -> None:
    # on the code as found: RecursionError, TypeError, AttributeError (report_html, which
    # log_mlflow exports, shows the failed trials' transcripts)
    df = configurations(1).astype({column: object})
    failed = df.index[~df["passed"].astype(bool)][0]
    df.loc[failed, column] = value
    html = report_html(df, k=1, n_boot=0, max_failures=50)
    assert said in html


def drawn_figures(monkeypatch, df, **options) -> tuple[str, dict[str, object]]:
    """The page, and each figure's Axes by its alt text, caught as the page embeds it."""
    figures = {}
    embed = report_html_module._figure

    def keep(ax, alt):
        ax.figure.canvas.draw()
        figures[alt.split(" ")[0]] = {
            "ticks": [t.get_text() for t in ax.get_yticklabels()],
            "titles": [a.get_title(loc="left") for a in ax.figure.axes if a.get_visible() and a.get_lines()],
            "panels": [a for a in ax.figure.axes if a.get_visible() and a.get_lines()],
            "ax": ax,
        }
        return embed(ax, alt)

    monkeypatch.setattr(report_html_module, "_figure", keep)
    monkeypatch.setattr(plt, "close", lambda *a: None)  # keep the figures to look at
    return report_html_module.report_html(df, **options), figures


def key_of(label: str) -> str:
    return label.split(":")[0]


def test_past_26_configurations_every_figure_keeps_the_table_s_order(monkeypatch):
    """Keys A … Z, AA … AD in the table, and the same order in the heatmap, the outcome chart and
    the curve panels, not the names' alphabetical one (A, AA, AB, … B)."""
    page, figures = drawn_figures(monkeypatch, configurations(30, tasks=3, trials=2), k=1, n_boot=0)
    keys = [report_html_module._key(i) for i in range(30)]
    assert re.findall(r"<tr><td>([A-Z]+)</td>", page)[:30] == keys
    assert [key_of(t) for t in figures["per-task"]["ticks"]] == keys  # one row per configuration
    assert [key_of(t) for t in figures["outcome"]["ticks"]] == keys  # top first
    assert [key_of(t) for t in figures["pass@k"]["titles"]] == keys
    plt.close("all")


def long_configurations(count: int, tasks: int = 3) -> pd.DataFrame:
    df = configurations(count, tasks=tasks, trials=2)
    temperature = df["model"].str[-2:].astype(int) % 5 / 4
    return df.assign(
        provider="ollama",
        model="acme/reasoning-"
        + df["model"].str[-2:].astype(int).floordiv(5).astype(str)
        + "-instruct-q4_K_M",
        config="json=schema, max_turns=6, temperature=" + temperature.astype(str),
    )


def test_the_overview_shows_each_configuration_s_pass_k_from_the_report_best_first(monkeypatch):
    df = long_configurations(40)
    report = report_frame(df, k=2, by=default_by(df, None), n_boot=100)
    _, figures = drawn_figures(monkeypatch, df, k=2, n_boot=100, report=report)
    keys, names, _ = config_keys(df, report, default_by(df, None))
    ticks = figures["pass^2"]["ticks"]
    assert sorted(ticks) == sorted(names)  # every configuration, named by key and what it is
    assert names[0] == "A: ollama/acme/reasoning-0-instruct-q4_K_M · temperature=0.0"
    values = report.set_index(pd.Index(names))["pass^k"]
    shown = [offset[0] for c in figures["pass^2"]["ax"].collections if not hasattr(c, "get_segments")
             for offset in c.get_offsets()]  # fmt: skip
    assert shown == pytest.approx(values.loc[ticks].tolist())  # drawn from the report: no value of its own
    assert values.loc[ticks].is_monotonic_decreasing  # best first
    plt.close("all")


def test_forty_curve_panels_say_what_each_configuration_is_within_their_width(monkeypatch):
    df = long_configurations(40)
    _, figures = drawn_figures(monkeypatch, df, k=2, n_boot=0)
    curves = figures["pass@k"]
    _, names, _ = config_keys(df, report_frame(df, k=2, n_boot=0), default_by(df, None))
    assert ["".join(t.split()) for t in curves["titles"]] == [
        "".join(n.split()) for n in names
    ]  # not a key alone
    panels = curves["panels"]
    renderer = panels[0].figure.canvas.get_renderer()
    gap = panels[1].get_window_extent().x0 - panels[0].get_window_extent().x1
    for panel in panels:
        title = panel.title if panel.get_title() else panel._left_title
        assert title.get_window_extent(renderer).x1 <= panel.get_window_extent().x1 + gap  # not into the next
    plt.close("all")


def test_sorting_by_pass_k_gives_the_best_configuration_key_a(monkeypatch):
    df = configurations(6)
    page, figures = drawn_figures(monkeypatch, df, k=2, n_boot=0, sort="pass^k")
    report = best_first(report_frame(df, k=2, n_boot=0))
    models = report["model"].tolist()
    assert models != sorted(models)
    assert re.findall(r"<tr><td>([A-Z]+)</td><td>/?([^<]+)</td>", page)[:6] == list(
        zip("ABCDEF", models, strict=True)
    )
    assert [t.split("/")[1].split(" ")[0] for t in figures["outcome"]["ticks"]] == models
    plt.close("all")


# Appended to a copy of the page: how many lines each cell of the report table's value columns takes.
LINES = """<script>window.addEventListener('load', () => {
  const table = document.querySelector('table.passk-table');
  const heads = [...table.querySelectorAll('th')].map(th => th.textContent);
  const cells = [];
  for (const row of table.querySelectorAll('tbody tr')) {
    [...row.children].forEach((td, i) => { if (/^(pass|these)/.test(heads[i])) {
      const range = document.createRange(); range.selectNodeContents(td);
      const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
      cells.push({column: heads[i], text: td.textContent, lines: tops.size}); } });
  }
  const pre = document.createElement('pre'); pre.id = 'sizes'; pre.textContent = JSON.stringify(cells);
  document.body.appendChild(pre); });</script>"""


def test_an_interval_stays_on_one_line_at_40_configurations_in_chromium(tmp_path):
    page = report_html(long_configurations(40, tasks=5), k=2, n_boot=100)
    cells = rendered_sizes(page, tmp_path, script=LINES, width=800)  # half a laptop's screen
    assert len(cells) == 40 * 3 and all("[" in cell["text"] for cell in cells)  # value [lo, hi]
    assert [cell for cell in cells if cell["lines"] != 1] == []
    plt.close("all")
