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
import struct
from collections.abc import Sequence

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes

from passk_nb._version import __version__
from passk_nb.stats.counts import counts, outcome_counts
from passk_nb.stats.flags import claimed_unperformed_action
from passk_nb.stats.params import CI, INFRA, N_BOOT, SEED, default_by, share_docs
from passk_nb.stats.report import report_frame
from passk_nb.stats.result import carry
from passk_nb.stats.summary import best_first, curve
from passk_nb.view.axes import wrap_fields
from passk_nb.view.labels import ONE_GROUP, cut_text, text_or_none
from passk_nb.view.plots import figure_png, plot_curve, plot_outcomes, plot_summary, plot_tasks
from passk_nb.view.tables import (
    render_table,
    report_display,
    report_notes,
    row_fields,
    split_fields,
)
from passk_nb.view.transcript_html import failed_first, transcript_html, trial_label

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 90em; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table.passk-table { border-collapse: collapse; font-size: 14px; }
table.passk-table th, table.passk-table td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
table.passk-table th { background: #f3f3f3; position: sticky; top: 0; }
div.wide { overflow-x: auto; }
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
    sort: str | None = None,
    title: str = "passk report",
) -> str:
    """The whole report as one HTML document (a string), self-contained and escaped.

    ``report``: the :func:`passk_nb.stats.report.report_frame` of ``df`` when already
    computed. ``max_failures``: how many failed trials' transcripts to include, shared out
    evenly over the configurations (at least one each; failures whose answer claims an
    undone action first). ``sort``: ``"pass^k"`` or ``"pass@k"`` orders the configurations from
    the highest value to the lowest (:func:`~passk_nb.stats.summary.best_first`); None keeps the
    report's order. Several configurations get keys (A, B, … Z, AA, …) in that order, which every
    figure keeps and names them by; an overview chart shows each one's pass^k with its interval,
    best first, and the curve is drawn as one small panel per configuration.

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
    if sort is not None:
        report = best_first(report, sort)
    display, caption = report_display(report, by=by, ci=ci)
    keys, names, labels = config_keys(df, report, by)
    many = len(keys) > 1
    if many:
        display.insert(0, "key", keys)
    one_line = "".join(  # a value with its interval, or a count of trials, never broken in two
        f"div.report td:nth-child({i + 1}) {{ white-space: nowrap; }}"
        for i, column in enumerate(display.columns)
        if column.startswith(("pass@", "pass^", "these tasks", "trials", "cost/reliable"))
    )
    # One order everywhere: the report's (keys A … Z, AA …), never the names' alphabetical order.
    labelled = df.assign(configuration=pd.Categorical(labels, categories=names, ordered=True))
    group = ("configuration",)
    tasks = df["task"].nunique()

    runs = df["run_id"].nunique()
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    transpose = len(keys) > tasks
    across = labelled
    if not transpose and max(map(len, names)) > _SHORT:  # configurations as columns: keys only
        by_key = labels.map(dict(zip(names, keys, strict=True)))
        across = df.assign(configuration=pd.Categorical(by_key, categories=keys, ordered=True))
    per_task = plot_tasks(counts(across, by=group, infra=infra), at_k=k, transpose=transpose)
    curves = _curves(labelled, names, k=k, ci=ci, n_boot=n_boot, seed=seed, infra=infra)
    overview = (
        _figure(
            plot_summary(carry(report.assign(configuration=names), report, by=group)),
            f"pass^{k} of every configuration with its {ci:.0%} interval, best first",
        )
        if many
        else ""
    )
    parts = [
        "<!DOCTYPE html>",
        "<html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{_e(title)}</title><style>{_STYLE}{one_line}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p>{len(df)} trials of {tasks} task{'s' * (tasks != 1)} in {runs} run{'s' * (runs != 1)}; "
        f"k = {k}, {ci:.0%} intervals. Written by passk-nb {_e(__version__)} on {when}.</p>",
        "<h2>pass@k and pass^k</h2>",
        f"<p class='caption'>{_e(caption)}</p>" if caption else "",
        "<p class='caption'>Every figure below names a configuration by its key, in this order.</p>"
        if many
        else "",
        overview,
        "<div class='wide report'>" + render_table(display, "html") + "</div>",
        "<ul class='notes'>" + "".join(f"<li>{_e(n)}</li>" for n in report_notes(report, ci=ci)) + "</ul>",
        "<h2>As k grows</h2>",
        _figure(curves, f"pass@k and pass^k against k with {ci:.0%} intervals"),
        "<h2>Per task</h2>",
        _figure(per_task, f"per-task successes and pass^{k}"),
        "<h2>How the trials ended</h2>",
        _figure(plot_outcomes(counts(labelled, by=group)), "outcome of every trial, by configuration"),
        render_table(outcome_counts(labelled, by="configuration", total=True), "html"),
        "<h2>Failed trials</h2>",
        _failures(labelled, names, max_failures),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)


def config_keys(
    df: pd.DataFrame, report: pd.DataFrame, by: Sequence[str]
) -> tuple[list[str], list[str], pd.Series]:
    """A short key for each configuration (row of ``report``), the name figures give it, and
    each trial of ``df`` that name.

    Keys are ``A``, ``B``, … ``Z``, ``AA``, … in the report's order; a name is the key followed
    by what the configuration is (the fields that differ). One configuration is named "all trials".

    >>> import pandas as pd
    >>> df = pd.DataFrame({"model": ["m1", "m2", "m1"]})
    >>> keys, names, labels = config_keys(df, pd.DataFrame({"model": ["m1", "m2"]}), ["model"])
    >>> keys, names, labels.tolist()
    (['A', 'B'], ['A: m1', 'B: m2'], ['A: m1', 'B: m2', 'A: m1'])
    """
    varying, _ = split_fields(row_fields(report, by))
    if not varying:
        return ["all trials"], ["all trials"], pd.Series("all trials", index=df.index)
    described = _described(varying)
    keys = [_key(i) for i in range(len(described))]
    names = [f"{key}: {text}" for key, text in zip(keys, described, strict=True)]
    trials = _described(split_fields(row_fields(df, by))[0])
    return keys, names, trials.map(dict(zip(described, names, strict=True)))


#: Longest name a figure puts across (configurations as columns); longer ones show their key only.
_SHORT = 24


def _described(fields: dict[str, pd.Series]) -> pd.Series:
    """Per row, the values of ``fields`` joined by " · "."""
    parts = [values.astype(str) for values in fields.values()]
    text = parts[0]
    for part in parts[1:]:
        text = text + " · " + part
    return text


def _key(i: int) -> str:
    """A, B, … Z, AA, AB, …"""
    text = ""
    i += 1
    while i:
        i, rest = divmod(i - 1, 26)
        text = chr(ord("A") + rest) + text
    return text


def _curves(
    labelled: pd.DataFrame, names: list[str], *, k: int, ci: float, n_boot: int, seed: int, infra: str
) -> Axes:
    """One small panel of pass@k and pass^k per configuration (a single axes for one), shared axes,
    each titled with its configuration's name, wrapped between fields."""
    group = ("configuration",)
    frame = curve(labelled, by=group, ci=ci, n_boot=n_boot, seed=seed, infra=infra)
    if len(names) == 1:
        return plot_curve(frame, at_k=k)
    columns = min(len(names), _PANELS_PER_ROW)
    rows = -(-len(names) // columns)
    titles = [wrap_fields(name, _PANEL_TITLE) for name in names]
    lines = max(title.count("\n") + 1 for title in titles)
    figure, grid = plt.subplots(
        rows,
        columns,
        figsize=(3.0 * columns, (2.25 + 0.15 * lines) * rows + 0.9),
        sharex=True,
        sharey=True,
        layout="constrained",
        squeeze=False,
    )
    handles: dict[str, Artist] = {}
    legend_title = None
    configuration = frame["configuration"].astype(str)
    for ax, name, title in zip(grid.flat, names, titles, strict=False):
        plot_curve(frame[configuration == name], at_k=k, ax=ax, title=title)
        legend = ax.get_legend()
        if legend is not None:
            legend_title = legend_title or legend.get_title().get_text()
            for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
                label = text.get_text()
                if label not in (name, ONE_GROUP) and handle is not None:  # the panel's title names it
                    handles.setdefault(label, handle)
            legend.remove()
        ax.title.set_fontsize("small")
        if ax not in grid[-1]:
            ax.set_xlabel("")
        if ax not in grid[:, 0]:
            ax.set_ylabel("")
    for ax in list(grid.flat)[len(names) :]:
        ax.set_visible(False)
    figure.legend(
        list(handles.values()),
        list(handles),
        loc="outside lower center",
        ncol=min(3, len(handles)),
        frameon=False,
        fontsize="small",
        title=legend_title,
        title_fontsize="small",
    )
    return grid.flat[0]


_PANELS_PER_ROW = 4
#: Characters in a line of a panel's title (small type, a 3-inch panel).
_PANEL_TITLE = 34


def _failures(labelled: pd.DataFrame, names: list[str], limit: int) -> str:
    """Failed trials of every configuration: ``limit`` in all, shared out evenly, at least one each,
    claimed-but-not-done actions first; each titled with its outcome and the recorded reason."""
    failed = labelled[~labelled["passed"].astype(bool)]
    if failed.empty:
        return "<p>No trial failed.</p>"
    by_name = {str(name): rows for name, rows in failed.groupby("configuration", sort=False, observed=True)}
    groups = [(name, by_name[name]) for name in names if name in by_name]
    each = max(1, limit // len(groups))
    many = len(names) > 1
    parts = [
        f"<p>Up to {each} failed trial{'s' * (each != 1)} of each configuration, those whose answer "
        "claims an action that was not done first. Click one to open its transcript.</p>"
    ]
    for name, rows in groups:
        ordered = failed_first(rows).head(each)
        claimed = claimed_unperformed_action(ordered)
        shown = f"{len(ordered)} of {len(rows)}" if len(rows) > len(ordered) else f"all {len(rows)}"
        if many:
            parts.append(f"<h3>{_e(name)}</h3><p>Showing {shown} failed trials.</p>")
        else:
            parts.append(f"<p>Showing {shown} failed trials.</p>")
        parts += [
            f"<details><summary>{_e(_failure_title(row, bool(claimed.loc[index])))}</summary>"
            f"{transcript_html(row)}</details>"
            for index, row in ordered.iterrows()
        ]
    return "".join(parts)


def _failure_title(row: pd.Series, claimed: bool) -> str:
    title = trial_label(row, claimed)
    reason = text_or_none(row.get("error"))
    if reason:
        title += " — " + cut_text(" ".join(reason.split()), _REASON)
    return title


_REASON = 160


def _figure(ax: Axes, alt: str) -> str:
    figure = ax.figure
    png = figure_png(figure)  # type: ignore[arg-type]
    plt.close(figure)  # type: ignore[arg-type]
    data = base64.b64encode(png).decode("ascii")
    width, height = struct.unpack(">II", png[16:24])  # the PNG header's IHDR
    return (
        f"<img class='figure' alt='{_e(alt)}' data-size='{width}x{height}' "
        f"src='data:image/png;base64,{data}'>"
    )


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)
