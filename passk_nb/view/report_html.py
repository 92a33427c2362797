"""One self-contained HTML page from trial records: what ``passk report --format html`` writes.

The page holds the report table, the pass@k / pass^k curve with its intervals, the per-task
heatmap, the outcome breakdown and the failed trials' transcripts. Figures are PNGs embedded as
``data:`` URIs and the style sheet is inline, so the file opens anywhere, offline, without
Jupyter, and loads nothing from the network. Every piece of record text is escaped (model
output shows as text, never as markup).
"""

from __future__ import annotations

import base64
import datetime as dt
import html
from collections.abc import Sequence

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes

from passk_nb._version import __version__
from passk_nb.stats.counts import outcome_counts
from passk_nb.stats.flags import claimed_unperformed_action
from passk_nb.stats.params import CI, INFRA, N_BOOT, SEED, default_by, share_docs
from passk_nb.stats.report import report_frame
from passk_nb.view.plots import figure_png, plot_curve, plot_outcomes, plot_tasks
from passk_nb.view.tables import (
    render_table,
    report_display,
    report_notes,
    row_fields,
    split_fields,
)
from passk_nb.view.transcript_html import failed_first, transcript_html, trial_label

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 75em; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table.passk-table { border-collapse: collapse; font-size: 14px; }
table.passk-table th, table.passk-table td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
table.passk-table th { background: #f3f3f3; }
p.caption { color: #444; } ul.notes { color: #555; font-size: 13px; }
img.figure { max-width: 100%; height: auto; display: block; margin: 0.5em 0; }
details { margin: 4px 0; } summary { cursor: pointer; font-family: monospace; }
"""


@share_docs
def report_html(
    df: pd.DataFrame,
    *,
    k: int,
    by: str | Sequence[str] | None = None,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
    report: pd.DataFrame | None = None,
    max_failures: int = 25,
    title: str = "passk report",
) -> str:
    """The whole report as one HTML document (a string), self-contained and escaped.

    ``report``: the :func:`passk_nb.stats.report.report_frame` of ``df`` when already
    computed. ``max_failures``: how many failed trials' transcripts to include (failures
    whose answer claims an undone action first).

    {df}
    {k}
    {by}
    {ci}
    {n_boot}
    {seed}
    {infra}

    >>> from passk_nb.data.records import frame_from_records
    >>> df = frame_from_records([{"run_id": "r", "suite": "s", "task": t, "trial": i, "model": "m",
    ...     "passed": i < c, "outcome": "pass" if i < c else "wrong_state", "final_answer": "<b>hi</b>"}
    ...     for t, c in [("a", 2), ("b", 1)] for i in range(2)])
    >>> page = report_html(df, k=1, n_boot=0)
    >>> page.startswith("<!DOCTYPE html>"), "<b>hi</b>" in page, "&lt;b&gt;hi&lt;/b&gt;" in page
    (True, False, True)
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    by = default_by(df, by)
    if report is None:
        report = report_frame(df, k=k, by=by, ci=ci, n_boot=n_boot, seed=seed, infra=infra)
    display, caption = report_display(report, by=by, ci=ci)
    varying, _ = split_fields(row_fields(report, by))
    label_name = " · ".join(varying) or "group"
    if varying:
        fields = row_fields(df, by)
        labels = pd.Series([""] * len(df), index=df.index)
        for i, name in enumerate(varying):
            labels = labels + (" · " if i else "") + fields[name]
    else:
        labels = pd.Series("all trials", index=df.index)
    labelled = df.assign(**{label_name: labels.to_numpy()})
    group = (label_name,)

    runs = df["run_id"].nunique()
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html>",
        "<html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p>{len(df)} trials of {df['task'].nunique()} tasks in {runs} run{'s' * (runs != 1)}; "
        f"k = {k}, {ci:.0%} intervals. Written by passk-nb {_e(__version__)} on {when}.</p>",
        "<h2>pass@k and pass^k</h2>",
        f"<p class='caption'>{_e(caption)}</p>" if caption else "",
        render_table(display, "html"),
        "<ul class='notes'>" + "".join(f"<li>{_e(n)}</li>" for n in report_notes(report, ci=ci)) + "</ul>",
        "<h2>As k grows</h2>",
        _figure(
            plot_curve(labelled, by=group, k=k, ci=ci, n_boot=n_boot, seed=seed),
            f"pass@k and pass^k against k with {ci:.0%} intervals",
        ),
        "<h2>Per task</h2>",
        _figure(plot_tasks(labelled, by=group, k=k, infra=infra), f"per-task successes and pass^{k}"),
        "<h2>How the trials ended</h2>",
        _figure(plot_outcomes(labelled, by=group), "outcome of every trial, by group"),
        render_table(outcome_counts(labelled, by=label_name, total=True), "html"),
        "<h2>Failed trials</h2>",
        _failures(df, max_failures),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)


def _failures(df: pd.DataFrame, limit: int) -> str:
    failed = df[~df["passed"].astype(bool)]
    if failed.empty:
        return "<p>No trial failed.</p>"
    ordered = failed_first(failed).head(limit)
    claimed = claimed_unperformed_action(ordered)
    shown = (
        f"the first {len(ordered)} of {len(failed)}" if len(failed) > len(ordered) else f"all {len(failed)}"
    )
    items = [
        f"<details><summary>{_e(trial_label(row, bool(claimed.loc[index])))}</summary>"
        f"{transcript_html(row)}</details>"
        for index, row in ordered.iterrows()
    ]
    return (
        f"<p>Showing {shown} failed trials, those whose answer claims an action that was not done "
        "first. Click one to open its transcript.</p>" + "".join(items)
    )


def _figure(ax: Axes, alt: str) -> str:
    figure = ax.figure
    png = figure_png(figure)  # type: ignore[arg-type]
    plt.close(figure)  # type: ignore[arg-type]
    data = base64.b64encode(png).decode("ascii")
    return f"<img class='figure' alt='{_e(alt)}' src='data:image/png;base64,{data}'>"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)
