"""Matplotlib plots of trial records: curves, per-task heatmaps, prompt flips, outcomes.

A plot draws what its statistic returned (``plot_curve(passk_nb.curve(df))``, also written
``passk_nb.curve(df).plot()``), reading the groups and the interval level from the result's
``.attrs``; it takes only drawing options, draws on ``ax`` (a new figure when None) and returns
the Axes. ``title``: None, a default title; ``""``, none.
Group colours come from the Okabe–Ito palette and each outcome has a fixed colour, all safe for
colour-blind readers; legends sit outside the data area. Groups are labelled by the values that
differ among them, with prompt hashes shown as ``name (hash)`` when the records carry
``prompt_name``; a figure of one group calls it "all trials" and says what it is once, in the
title's last line.

>>> from passk_nb.data.records import frame_from_records
>>> df = frame_from_records(
...     {"run_id": "r", "suite": "s", "task": task, "trial": i, "model": "toy", "prompt_hash": "p",
...      "passed": i < c, "outcome": "pass" if i < c else "wrong_state"}
...     for task, c in [("a", 4), ("b", 3), ("c", 1)] for i in range(4))
>>> from passk_nb.stats.summary import curve
>>> ax = plot_curve(curve(df, by=("model", "prompt_hash"), n_boot=200))
>>> [line.get_label() for line in ax.get_lines()]  # one group: its fields come once, in the title
['all trials — pass@k', 'all trials — pass^k']
>>> ax.get_title(loc="left").splitlines()[-1]
'all trials: toy · p'
>>> import matplotlib.pyplot as plt; plt.close("all")
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from passk_nb.stats import summary as _summary
from passk_nb.stats.counts import UNCOUNTED_FAILURE, outcome_counts
from passk_nb.stats.params import share_docs
from passk_nb.stats.result import result_by, result_ci
from passk_nb.stats.summary import METRICS
from passk_nb.view.axes import (
    TICK_WIDTH,
    label_columns,
    label_inches,
    legend_below,
    legend_outside,
    new_axes,
    plain_text,
    require_result,
    set_title,
    wrap_fields,
)
from passk_nb.view.labels import (
    OUTCOME_COLORS,
    PALETTE,
    UNCOUNTED_COLOR,
    figure_labels,
    format_value,
    group_colors,
    group_labels,
    luminance,
    prompt_names,
)

_METRIC_STYLE: dict[str, dict[str, Any]] = {
    "pass@k": {"linestyle": "-", "marker": "o"},
    "pass^k": {"linestyle": "--", "marker": "s"},
}


_METRIC_NAME = {
    "pass@k": "pass@k (capability: ≥1 of k succeeds)",
    "pass^k": "pass^k (reliability: all k succeed)",
}


@plain_text
@share_docs
def plot_curve(
    curve: pd.DataFrame,
    *,
    metrics: Sequence[str] = METRICS,
    at_k: int | None = None,
    bands: bool = True,
    sparse: bool = False,
    names: dict[str, str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """pass@k and pass^k against k: one colour per group of ``by``, one line style per metric.

    curve: what :func:`passk_nb.curve` returned (its groups and interval level come from its
    ``.attrs``; select rows, such as some ks, before drawing).
    metrics: which of pass@k and pass^k to draw.
    at_k: mark this k with a vertical line.
    bands: shade the intervals.
    sparse: also draw the ks where fewer than half of a group's tasks have k trials (by
    default each group's line stops before the first such k and its legend entry says so).
    names: ``{prompt_hash: prompt_name}`` for the labels (default: from ``curve``).
    {ax}
    {title}

    Shaded bands are the ``ci`` intervals for new tasks like these (exact per-task intervals
    when ``by`` contains ``"task"``); where a group has too few tasks for that interval, its band
    is the fixed-task interval (these tasks, re-rolled) and the legend says so. Where k exceeds
    some tasks' n those tasks drop out and the curve can rise: those points are hollow, with a
    note; from the first k that covers under half of a group's tasks its line is not drawn
    (unless ``sparse``), since a mean over a few tasks would read as a jump of the whole curve.
    With a single group the gap between the two metrics is hatched. Draws one line per
    (group, metric), labelled ``"<group> — <metric>"``.

    >>> from passk_nb.data.records import frame_from_records
    >>> df = frame_from_records(
    ...     {"run_id": "r", "suite": "s", "task": task, "trial": i, "model": m, "prompt_hash": "p",
    ...      "passed": i < c, "outcome": "pass" if i < c else "wrong_state"}
    ...     for m, cs in [("big", (4, 4, 3, 4, 2)), ("small", (4, 1, 0, 2, 0))]
    ...     for task, c in zip("abcde", cs) for i in range(4))
    >>> from passk_nb.stats.summary import curve
    >>> ax = plot_curve(curve(df, by="model", n_boot=200), at_k=2)
    >>> len([line for line in ax.get_lines() if not line.get_label().startswith("_")])  # 2 models x 2 metrics
    4
    >>> ax.get_xlabel()
    'k (number of tries)'
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    unknown = [m for m in metrics if m not in METRICS]
    if unknown or not metrics:
        raise ValueError(f"metrics must be a non-empty subset of {list(METRICS)}; got {list(metrics)}")
    frame = require_result(curve, "curve", "plot_curve", "passk_nb.curve(df)")
    by = result_by(frame, "passk_nb.curve(df)")
    ci = result_ci(frame, None, "passk_nb.curve(df)")
    labels, described = figure_labels(
        frame, by, shown=label_columns(frame, by), names={**prompt_names(frame), **(names or {})}
    )
    ax = new_axes(ax)
    group_handles: list[Line2D] = []
    single = labels.nunique() == 1
    fixed_bands = partial_any = False
    colors = group_colors(labels.nunique())
    for i, (label, rows) in enumerate(frame.groupby(labels, sort=False)):
        color = colors[i]
        stop = None if sparse else _first_sparse_k(rows)
        entry = label
        if stop is not None:
            rows = rows[rows["k"] < stop]
            entry = f"{label} (k ≥ {stop}: under half the tasks, not drawn)"
        group_handles.append(Line2D([], [], color=color, linewidth=3, label=entry))
        by_metric = {}
        for metric in metrics:
            line = rows[rows["metric"] == metric].sort_values("k")
            by_metric[metric] = line
            style = _METRIC_STYLE[metric]
            ax.plot(line["k"], line["value"], color=color, label=f"{label} — {metric}", **style)
            partial = line["partial"].to_numpy(dtype=bool) if "partial" in line else np.zeros(len(line), bool)
            if partial.any():  # tasks dropped out: hollow markers over the filled ones
                partial_any = True
                ax.plot(
                    line["k"][partial],
                    line["value"][partial],
                    linestyle="none",
                    marker=style["marker"],
                    markerfacecolor="white",
                    markeredgecolor=color,
                    label="_partial",
                    zorder=3,
                )
            lo, hi = line["lo"], line["hi"]
            if "ci_method" in line and (line["ci_method"] == _summary.DECLINED).all():
                lo, hi = line["fixed_lo"], line["fixed_hi"]
                fixed_bands = fixed_bands or bool(lo.notna().any())
            finite = lo.notna() & hi.notna()
            if bands and finite.any():
                ax.fill_between(
                    line["k"][finite], lo[finite], hi[finite], color=color, alpha=0.13, linewidth=0
                )
        if single and len(by_metric) == 2:
            at, hat = by_metric["pass@k"], by_metric["pass^k"]
            ax.fill_between(
                at["k"],
                hat["value"].to_numpy(),
                at["value"].to_numpy(),
                facecolor="none",
                edgecolor=color,
                hatch="//",
                alpha=0.35,
                linewidth=0,
                label="_gap",
            )
    if at_k is not None:
        ax.axvline(at_k, color="0.4", linewidth=1, linestyle=":", label="_k")
    ax.set_xlabel("k (number of tries)")
    ax.set_ylabel("estimate (mean over tasks)" if "task" not in by else "estimate")
    ax.set_ylim(-0.03, 1.03)
    kvals = sorted(frame["k"].unique())
    if kvals and len(kvals) <= 20:
        ax.set_xticks(kvals)
    ax.grid(True, alpha=0.3)
    handles: list[Artist] = [*group_handles]
    handles += [Line2D([], [], color="0.2", label=_METRIC_NAME[m], **_METRIC_STYLE[m]) for m in metrics]
    if single and len(metrics) == 2:
        gap = Patch(facecolor="none", edgecolor=PALETTE[0], hatch="//", label="gap: pass@k − pass^k")
        handles.append(gap)
    if partial_any:
        handles.append(
            Line2D(
                [],
                [],
                linestyle="none",
                marker="o",
                markerfacecolor="white",
                markeredgecolor="0.2",
                label="hollow: k above some tasks' n;\nthose tasks left out (can rise)",
            )
        )
    if "task" in by:
        interval = "exact per-task interval"
    elif fixed_bands:
        interval = "these tasks re-rolled\n(too few tasks for new tasks)"
    else:
        interval = "new tasks like these"
    legend_outside(ax, handles=handles, title=f"bands: {ci:.0%} interval, {interval}" if bands else None)
    set_title(ax, title, "Capability (pass@k) vs reliability (pass^k) as k grows", note=described)
    return ax


def _first_sparse_k(rows: pd.DataFrame) -> int | None:
    """The smallest k at which fewer than half of this group's tasks have k trials, or None."""
    if not {"n_tasks", "n_tasks_covered"} <= set(rows.columns):
        return None
    sparse = rows[2 * rows["n_tasks_covered"] < rows["n_tasks"]]
    return int(sparse["k"].min()) if len(sparse) else None


@plain_text
@share_docs
def plot_tasks(
    counts: pd.DataFrame,
    *,
    at_k: int | None = None,
    cmap: str = "cividis",
    transpose: bool = False,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Heatmap of per-task success: one row per task, one column per group of ``by``.

    counts: what :func:`passk_nb.counts` returned (one row per group and task).
    at_k: colour by the unbiased pass^k at this k instead of the success rate.
    cmap: the matplotlib colormap.
    transpose: one row per group and one column per task instead (for more groups than tasks:
    the figure then grows down, with its rows).
    {ax}
    {title}

    Each cell shows the counts ``successes/trials`` (e.g. ``3/4``) and is coloured by
    the success rate, or by the unbiased pass^k when ``at_k`` is given (then also written
    in the cell). Cells of tasks a group never ran say "–".

    >>> from passk_nb.data.records import frame_from_records
    >>> df = frame_from_records(
    ...     {"run_id": "r", "suite": "s", "task": task, "trial": i, "model": "toy",
    ...      "passed": i < c, "outcome": "pass" if i < c else "wrong_state"}
    ...     for task, c in [("a", 4), ("b", 3)] for i in range(4))
    >>> from passk_nb.stats.counts import counts
    >>> ax = plot_tasks(counts(df, by="model"))
    >>> sorted(t.get_text() for t in ax.texts)
    ['3/4', '4/4']
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    counted = require_result(counts, "counts", "plot_tasks", "passk_nb.counts(df)")
    by = tuple(col for col in result_by(counted, "passk_nb.counts(df)") if col != "task")
    k = at_k
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # k above some cells' n: those cells say "k > n"
        per_task = _summary.summarize(
            counted, k=1 if k is None else k, by=(*by, "task"), infra=counted.attrs["infra"], n_boot=0
        )
    shown_by = label_columns(per_task, by)
    labels, described = figure_labels(per_task, by, shown=shown_by, names=prompt_names(counted))
    table = per_task.assign(_group=labels.to_numpy())
    tasks = list(pd.unique(counted["task"]))
    groups = list(pd.unique(labels))

    def grid(column: str) -> pd.DataFrame:
        return table.pivot(index="task", columns="_group", values=column).reindex(index=tasks, columns=groups)

    n, c = grid("trials"), grid("successes")
    if transpose:
        n, c = n.T, c.T
    values = grid("pass^k").to_numpy(dtype=float)
    values = values.T if transpose else values
    rows, columns = (groups, tasks) if transpose else (tasks, groups)
    row_labels = [wrap_fields(str(row), TICK_WIDTH) for row in rows]
    per_column = min(1.6, max(0.8, 0.1 * max((len(str(col)) for col in columns), default=1)))
    width = per_column * len(columns) + max(3.5, 2.2 + label_inches(row_labels))  # room for the labels
    ax = new_axes(ax, figsize=(max(4.5, width), max(2.5, 0.5 * len(rows) + 1.5)))
    colormap = plt.get_cmap(cmap).with_extremes(bad="0.92")
    image = ax.imshow(np.ma.masked_invalid(values), cmap=colormap, vmin=0, vmax=1, aspect="auto")
    for (row, col), value in np.ndenumerate(values):
        n_cell = n.iloc[row, col]
        if pd.isna(n_cell) or n_cell == 0:
            ax.text(col, row, "–", ha="center", va="center", color="0.3")
            continue
        text = f"{int(c.iloc[row, col])}/{int(n_cell)}"
        if k is not None:
            text += "\n" + ("k > n" if np.isnan(value) else f"{value:.2f}")
        shade = tuple(colormap(value)) if np.isfinite(value) else (0.92, 0.92, 0.92, 1.0)
        ax.text(
            col,
            row,
            text,
            ha="center",
            va="center",
            fontsize="small",
            color="black" if luminance(shade) > 0.5 else "white",
        )
    ax.set_xticks(range(len(columns)), columns, rotation=20, ha="right")
    ax.set_yticks(range(len(rows)), row_labels)
    group_name = "" if described else " · ".join(shown_by)
    ax.set_xlabel("task" if transpose else group_name)
    ax.set_ylabel(group_name if transpose else "task")
    bar = ax.figure.colorbar(image, ax=ax, shrink=0.85, pad=0.02)
    bar.set_label("success rate (successes / trials)" if k is None else f"pass^{k} (all {k} tries succeed)")
    set_title(ax, title, f"Per-task success by {group_name}" if group_name else "Per-task success", described)
    return ax


@plain_text
@share_docs
def plot_flips(
    flips: pd.DataFrame,
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Per task, the success rate under arm ``a`` and arm ``b`` of column ``on``, joined by a bar.

    flips: what :func:`passk_nb.flips` returned (the arms and ``alpha`` come from its ``.attrs``).
    {ax}
    {title}

    Tasks whose change is significant (``flip``: Benjamini–Hochberg q < ``alpha`` within the
    family) get a thick vermillion bar and a star; the counts and q-value are written at the
    right (``q=–``: not in the Tarone family, it could not reach significance). When the trial
    counts are too small for any task to reach p < ``alpha``, the title says so.

    >>> from passk_nb.data.records import frame_from_records
    >>> df = frame_from_records(
    ...     {"run_id": "r", "suite": "s", "task": task, "trial": i, "model": "toy", "prompt_hash": p,
    ...      "passed": i < c, "outcome": "pass" if i < c else "wrong_state"}
    ...     for p, cs in [("p1", (5, 5)), ("p2", (0, 4))] for task, c in zip("ab", cs) for i in range(5))
    >>> from passk_nb.stats.paired import flips
    >>> ax = plot_flips(flips(df, a="p1", b="p2"))
    >>> [c.get_offsets().shape[0] for c in ax.collections if c.get_gid() == "flips"]  # one flip: task a
    [1]
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    table = require_result(flips, "flips", "plot_flips", "passk_nb.flips(df, a=..., b=...)")
    on, a, b = (table.attrs.get(key) for key in ("on", "a", "b"))
    alpha = float(table.attrs.get("alpha", 0.05))
    table = table.reset_index(drop=True)
    names = prompt_names(table)
    label_a = "A" if a is None or on is None else format_value(on, a, names)
    label_b = "B" if b is None or on is None else format_value(on, b, names)
    group_cols = [col for col in table.columns if col not in _FLIP_COLUMNS]
    rows = table["task"].astype(str)
    extra = [col for col in group_cols if col != "task" and table[col].nunique(dropna=False) > 1]
    if extra:
        rows = rows + " · " + group_labels(table, extra, names=names)
    rate_a, rate_b = table["rate_a"], table["rate_b"]
    y = np.arange(len(table))[::-1]
    ax = new_axes(ax, figsize=(8.0, max(2.5, 0.5 * len(table) + 1.8)))
    flipped = table["flip"].to_numpy(dtype=bool)
    for yi, ra, rb, is_flip in zip(y, rate_a, rate_b, flipped, strict=True):
        ax.plot(
            [ra, rb],
            [yi, yi],
            color=PALETTE[3] if is_flip else "0.75",
            linewidth=4 if is_flip else 2,
            solid_capstyle="round",
            zorder=1,
            label="_bar",
        )
    ax.scatter(rate_a, y, marker="o", s=60, color=PALETTE[0], zorder=3, label=f"A: {label_a}")
    ax.scatter(rate_b, y, marker="D", s=55, color=PALETTE[1], zorder=3, label=f"B: {label_b}")
    if flipped.any():
        ax.scatter(
            np.full(flipped.sum(), 1.09),
            y[flipped],
            marker="*",
            s=160,
            color=PALETTE[3],
            clip_on=False,
            zorder=3,
            gid="flips",
            label=f"flip: BH q < {alpha:g}",
        )
    for yi, row in zip(y, table.itertuples(index=False), strict=True):
        q = "–" if pd.isna(row.q_value) else f"{row.q_value:.2g}"
        note = f"{row.successes_a}/{row.trials_a} → {row.successes_b}/{row.trials_b}   q={q}"
        ax.annotate(
            note,
            xy=(1.14, yi),
            xycoords=("data", "data"),
            va="center",
            fontsize="small",
            annotation_clip=False,
        )
    ax.set_yticks(y, rows)
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.7, len(table) - 0.3)
    ax.set_xlabel("success rate (successes / trials)")
    ax.grid(True, axis="x", alpha=0.3)
    legend_below(ax)
    default = f"Per-task success, {label_a} vs {label_b}"
    if "min_p" in table.columns and (table["min_p"] >= alpha).all():
        default += f"\n(too few trials: no task can reach p < {alpha:g}, whatever the data)"
    set_title(ax, title, default)
    return ax


_FLIP_COLUMNS = frozenset(
    {"successes_a", "trials_a", "successes_b", "trials_b", "rate_a", "rate_b", "delta"}
    | {"p_value", "q_value", "min_p", "flip"}
    | {"tested"}
)


@plain_text
@share_docs
def plot_summary(
    summary: pd.DataFrame,
    *,
    metric: str = "pass^k",
    sort: bool = True,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """One row per group of ``by``: its pass^k (or pass@k) and the interval, best at the top — the
    overview of many configurations.

    summary: what :func:`passk_nb.summarize` (or :func:`~passk_nb.stats.report.report_frame`)
    returned; its groups and interval level come from its ``.attrs``.
    metric: ``"pass^k"`` or ``"pass@k"``.
    sort: rows from the highest value to the lowest (:func:`~passk_nb.stats.summary.best_first`);
    False: the frame's order, top to bottom.
    {ax}
    {title}

    Each row is a dot at the value and a line over its ``ci`` interval for new tasks like these
    (exact per-task intervals when ``by`` contains ``"task"``); where a group has too few tasks for
    that interval, a hollow dot and a dashed line over the fixed-task interval (these tasks,
    re-rolled), as the legend says. A row without a value says "n/a".

    >>> from passk_nb.data.records import frame_from_records
    >>> df = frame_from_records(
    ...     {"run_id": m, "suite": "s", "task": task, "trial": i, "model": m,
    ...      "passed": i < c, "outcome": "pass" if i < c else "wrong_state"}
    ...     for m, cs in [("small", (4, 1, 0, 2, 0)), ("big", (4, 4, 3, 4, 2))]
    ...     for task, c in zip("abcde", cs) for i in range(4))
    >>> from passk_nb.stats.summary import summarize
    >>> ax = plot_summary(summarize(df, k=2, n_boot=0))
    >>> [t.get_text() for t in ax.get_yticklabels()]  # best first, at the top
    ['big', 'small']
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {list(METRICS)}; got {metric!r}")
    make = "passk_nb.summarize(df, k=...)"
    frame = require_result(summary, ("summarize", "report_frame"), "plot_summary", make)
    by = result_by(frame, make)
    ci = result_ci(frame, None, make)
    labels, described = figure_labels(frame, by, shown=label_columns(frame, by), names=prompt_names(frame))
    frame = pd.DataFrame(frame).reset_index(drop=True).assign(_label=labels.to_numpy())
    if sort:
        frame = _summary.best_first(frame, metric)
    n = len(frame)
    y = np.arange(n)[::-1]
    declined = (
        (frame["ci_method"] == _summary.DECLINED).to_numpy()
        if "ci_method" in frame
        else np.zeros(n, dtype=bool)
    )
    lo = np.where(declined, frame[f"{metric}_fixed_lo"], frame[f"{metric}_lo"])
    hi = np.where(declined, frame[f"{metric}_fixed_hi"], frame[f"{metric}_hi"])
    value = frame[metric].to_numpy(dtype=float)
    small = n > 20
    ticks = frame["_label"].astype(str).tolist()
    width = 5.0 + label_inches(ticks, 8.3 if small else 10.0)  # room for the labels, one line each
    ax = new_axes(ax, figsize=(max(7.5, width), max(2.4, 0.3 * n + 1.6)))
    color = PALETTE[0]
    if "task" in by:
        interval = f"{ci:.0%} interval, exact per task"
    else:
        interval = f"{ci:.0%} interval, new tasks like these"
    if not declined.all():
        ax.hlines(y[~declined], lo[~declined], hi[~declined], color=color, linewidth=2, label=interval)
        ax.scatter(value[~declined], y[~declined], color=color, s=30, zorder=3, label=metric)
    if declined.any():
        ax.hlines(
            y[declined],
            lo[declined],
            hi[declined],
            color=color,
            linewidth=1.5,
            linestyles="dashed",
            label=f"{ci:.0%} interval, these tasks re-rolled\n(too few tasks for new tasks)",
        )
        ax.scatter(
            value[declined],
            y[declined],
            facecolor="white",
            edgecolor=color,
            s=30,
            zorder=3,
            label=metric if declined.all() else "_declined",
        )
    for yi in y[np.isnan(value)]:
        ax.text(0.01, yi, "n/a", va="center", fontsize="small", color="0.3")
    ax.set_yticks(y, ticks, fontsize="small" if small else None)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlim(-0.02, 1.02)
    k_shown = int(frame["k"].iloc[0]) if n else frame.attrs.get("k")
    ax.set_xlabel(_METRIC_NAME[metric].replace("k", str(k_shown)))
    if n > 15:  # a tall figure: the scale at the top too
        ax.tick_params(axis="x", labeltop=True)
    ax.grid(True, axis="x", alpha=0.3)
    legend_below(ax)
    group = "" if described else " · ".join(label_columns(frame, by))
    default = f"{metric.replace('k', str(k_shown))} by {group or 'group'}" + (", best first" if sort else "")
    set_title(ax, title, default, note=described)
    return ax


@plain_text
@share_docs
def plot_outcomes(
    counts: pd.DataFrame,
    *,
    normalize: bool = True,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Stacked horizontal bars: how the trials of each group ended.

    counts: what :func:`passk_nb.counts` returned.
    normalize: shares of the group's trials (True) or counts.
    {ax}
    {title}

    One segment per outcome present (:data:`passk_nb.data.records.OUTCOMES` order, fixed
    colours from :data:`OUTCOME_COLORS`; ``infra_error`` hatched, as it is not the agent's
    fault), as shares of the group's trials (``normalize=True``) or counts. Segments wide
    enough show their count; the counts are :func:`~passk_nb.stats.counts.outcome_counts`'s.

    >>> from passk_nb.data.records import frame_from_records
    >>> df = frame_from_records(
    ...     {"run_id": "r", "suite": "s", "task": "t", "trial": i, "model": "toy",
    ...      "passed": o == "pass", "outcome": o}
    ...     for i, o in enumerate(["pass", "pass", "format_error", "wrong_state"]))
    >>> from passk_nb.stats.counts import counts
    >>> ax = plot_outcomes(counts(df, by="model"))
    >>> [text.get_text() for text in ax.get_legend().get_texts()]
    ['pass', 'wrong_state', 'format_error']
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    table_in = require_result(counts, "counts", "plot_outcomes", "passk_nb.counts(df)")
    by = result_by(table_in, "passk_nb.counts(df)")
    counted = outcome_counts(table_in, by=by)
    shown_by = label_columns(counted, by)
    labels, described = figure_labels(counted, by, shown=shown_by, names=prompt_names(table_in))
    table = counted.drop(columns=list(by)).set_axis(list(labels), axis=0)
    present = list(table.columns)
    totals = table.sum(axis=1)
    shown = table.div(totals, axis=0) if normalize else table
    y = np.arange(len(table))[::-1]
    ticks = [wrap_fields(f"{label} (n={total})", TICK_WIDTH) for label, total in totals.items()]
    ax = new_axes(ax, figsize=(max(8.0, 6.5 + label_inches(ticks)), max(2.2, 0.55 * len(table) + 1.4)))
    left = np.zeros(len(table))
    colors = {**OUTCOME_COLORS, UNCOUNTED_FAILURE: UNCOUNTED_COLOR}
    for outcome in present:
        widths = shown[outcome].to_numpy(dtype=float)
        color = colors[outcome]
        bars = ax.barh(
            y,
            widths,
            left=left,
            color=color,
            edgecolor="0.55" if outcome == UNCOUNTED_FAILURE else "white",
            linewidth=0.8,
            label=outcome,
            hatch="//" if outcome == "infra_error" else None,
        )
        for bar, count, width in zip(bars, table[outcome], widths, strict=True):
            if count and width >= (0.05 if normalize else 0.05 * shown.to_numpy().sum(axis=1).max()):
                ax.text(
                    bar.get_x() + width / 2,
                    bar.get_y() + bar.get_height() / 2,
                    str(count),
                    ha="center",
                    va="center",
                    fontsize="small",
                    color="black" if luminance(color) > 0.5 else "white",
                )
        left += widths
    ax.set_yticks(y, ticks)
    ax.set_ylim(-0.6, len(table) - 0.4)
    ax.set_xlabel("share of trials" if normalize else "trials")
    if normalize:
        ax.set_xlim(0, 1)
    legend_outside(ax, title="outcome")
    default = "How the trials ended" + ("" if described or not by else f", by {' · '.join(shown_by)}")
    set_title(ax, title, default, note=described)
    return ax


def figure_png(figure: Figure, dpi: int = 100) -> bytes:
    """The figure as PNG bytes (for widgets and static HTML)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()
