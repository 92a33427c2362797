"""Matplotlib plots of trial records: curves, per-task heatmaps, prompt flips, outcomes.

Every function takes the trial records (or the frame the matching statistic returns) as
``data``, draws on ``ax`` (a new figure when None) and returns the Axes. They share one
keyword vocabulary: ``by`` (the grouping columns: one colour, row or bar per group),
``k``, ``ci``, ``n_boot``, ``seed``, ``title`` (None: a default title; ``""``: none).
Colours come from the Okabe–Ito palette (safe for colour-blind readers); legends sit
outside the data area. Groups are labelled by their values, with prompt hashes shown as
``name (hash)`` when the records carry ``prompt_name``.

>>> from passk_nb.data.records import frame_from_records
>>> df = frame_from_records(
...     {"run_id": "r", "suite": "s", "task": task, "trial": i, "model": "toy", "prompt_hash": "p",
...      "passed": i < c, "outcome": "pass" if i < c else "wrong_state"}
...     for task, c in [("a", 4), ("b", 3), ("c", 1)] for i in range(4))
>>> ax = plot_curve(df, n_boot=200)
>>> [line.get_label() for line in ax.get_lines()]
['toy · p — pass@k', 'toy · p — pass^k']
>>> import matplotlib.pyplot as plt; plt.close("all")
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import offset_copy

from passk_nb.data.records import OUTCOMES
from passk_nb.stats.counts import as_columns
from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.paired import flips
from passk_nb.stats.summary import METRICS, curve, summarize
from passk_nb.view.labels import (
    OUTCOME_COLORS,
    PALETTE,
    format_value,
    group_labels,
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


_FIGSIZE = (7.5, 4.0)


def plot_curve(
    data: pd.DataFrame,
    *,
    ks: Sequence[int] | None = None,
    by: str | Sequence[str] = ("model", "prompt_hash"),
    metrics: Sequence[str] = METRICS,
    k: int | None = None,
    ci: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    bands: bool = True,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """pass@k and pass^k against k: one colour per group of ``by``, one line style per metric.

    ``data``: trial records (the curve is computed with :func:`passk_nb.stats.summary.curve`
    and ``ks``, ``by``, ``ci``, ``n_boot``, ``seed``), or a frame ``curve`` already
    returned. Shaded bands are the ``ci`` intervals: a cluster bootstrap over tasks
    ("new tasks like these"), or per-task exact intervals when ``by`` contains
    ``"task"``. With a single group the gap between the two metrics (capability the
    agent has but does not deliver every time) is hatched. ``k`` marks one k with a
    vertical line. Draws one line per (group, metric), labelled ``"<group> — <metric>"``.

    >>> from passk_nb.data.records import frame_from_records
    >>> df = frame_from_records(
    ...     {"run_id": "r", "suite": "s", "task": task, "trial": i, "model": m, "prompt_hash": "p",
    ...      "passed": i < c, "outcome": "pass" if i < c else "wrong_state"}
    ...     for m, cs in [("big", (4, 4, 3)), ("small", (4, 1, 0))]
    ...     for task, c in zip("abc", cs) for i in range(4))
    >>> ax = plot_curve(df, by="model", n_boot=200, k=2)
    >>> len([line for line in ax.get_lines() if not line.get_label().startswith("_")])  # 2 models x 2 metrics
    4
    >>> ax.get_xlabel()
    'k (number of tries)'
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    by = as_columns(by)
    unknown = [m for m in metrics if m not in METRICS]
    if unknown or not metrics:
        raise ValueError(f"metrics must be a non-empty subset of {list(METRICS)}; got {list(metrics)}")
    frame = data if _is_curve_frame(data) else curve(data, ks, by=by, ci=ci, n_boot=n_boot, seed=seed)
    if ks is not None and _is_curve_frame(data):
        frame = frame[frame["k"].isin(list(ks))]
    labels = group_labels(frame, by, names=prompt_names(data))
    ax = _axes(ax)
    group_handles: list[Line2D] = []
    single = labels.nunique() == 1
    for i, (label, rows) in enumerate(frame.groupby(labels, sort=False)):
        color = PALETTE[i % len(PALETTE)]
        group_handles.append(Line2D([], [], color=color, linewidth=3, label=label))
        by_metric = {}
        for metric in metrics:
            line = rows[rows["metric"] == metric].sort_values("k")
            by_metric[metric] = line
            style = _METRIC_STYLE[metric]
            ax.plot(line["k"], line["value"], color=color, label=f"{label} — {metric}", **style)
            finite = line["lo"].notna() & line["hi"].notna()
            if bands and finite.any():
                ax.fill_between(
                    line["k"][finite],
                    line["lo"][finite],
                    line["hi"][finite],
                    color=color,
                    alpha=0.13,
                    linewidth=0,
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
    if k is not None:
        ax.axvline(k, color="0.4", linewidth=1, linestyle=":", label="_k")
    ax.set_xlabel("k (number of tries)")
    ax.set_ylabel("estimate (mean over tasks)" if "task" not in by else "estimate")
    ax.set_ylim(-0.03, 1.03)
    kvals = sorted(frame["k"].unique())
    if kvals and len(kvals) <= 20:
        ax.set_xticks(kvals)
    ax.grid(True, alpha=0.3)
    handles = group_handles + [
        Line2D([], [], color="0.2", label=_METRIC_NAME[m], **_METRIC_STYLE[m]) for m in metrics
    ]
    if single and len(metrics) == 2:
        gap = Patch(facecolor="none", edgecolor=PALETTE[0], hatch="//", label="gap: pass@k − pass^k")
        handles.append(gap)
    interval = "exact per-task interval" if "task" in by else "bootstrap over tasks"
    _legend_outside(ax, handles=handles, title=f"bands: {ci:.0%} interval, {interval}" if bands else None)
    _title(ax, title, "Capability (pass@k) vs reliability (pass^k) as k grows")
    return ax


def plot_tasks(
    data: pd.DataFrame,
    *,
    by: str | Sequence[str] = "model",
    k: int | None = None,
    infra: str = "exclude",
    cmap: str = "cividis",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Heatmap of per-task success: one row per task, one column per group of ``by``.

    Each cell shows the counts ``successes/trials`` (e.g. ``3/4``) and is coloured by
    the success rate, or by the unbiased pass^k when ``k`` is given (then also written
    in the cell). ``infra_error`` trials are left out of the counts by default, as in
    :func:`passk_nb.stats.summary.summarize`. Cells of tasks a group never ran say "–".

    >>> from passk_nb.data.records import frame_from_records
    >>> df = frame_from_records(
    ...     {"run_id": "r", "suite": "s", "task": task, "trial": i, "model": "toy",
    ...      "passed": i < c, "outcome": "pass" if i < c else "wrong_state"}
    ...     for task, c in [("a", 4), ("b", 3)] for i in range(4))
    >>> ax = plot_tasks(df)
    >>> sorted(t.get_text() for t in ax.texts)
    ['3/4', '4/4']
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    by = as_columns(by)
    counts = summarize(data, k=1, by=(*by, "task"), n_boot=0, infra=infra)
    labels = group_labels(counts, by, names=prompt_names(data))
    counts = counts.assign(_group=labels.to_numpy())
    tasks = list(pd.unique(data["task"]))
    groups = list(pd.unique(labels))
    n = counts.pivot_table(index="task", columns="_group", values="trials", aggfunc="sum", sort=False)
    c = counts.pivot_table(index="task", columns="_group", values="successes", aggfunc="sum", sort=False)
    n, c = n.reindex(index=tasks, columns=groups), c.reindex(index=tasks, columns=groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = (c / n).to_numpy(dtype=float)
    values = rate if k is None else _pass_hat_grid(n.to_numpy(dtype=float), c.to_numpy(dtype=float), k)
    ax = _axes(ax, figsize=(max(4.5, 1.6 * len(groups) + 3.5), max(2.5, 0.55 * len(tasks) + 1.5)))
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
        shade = colormap(value) if np.isfinite(value) else (0.92, 0.92, 0.92, 1)
        luminance = 0.299 * shade[0] + 0.587 * shade[1] + 0.114 * shade[2]
        ax.text(
            col,
            row,
            text,
            ha="center",
            va="center",
            fontsize="small",
            color="black" if luminance > 0.5 else "white",
        )
    ax.set_xticks(range(len(groups)), groups, rotation=20, ha="right")
    ax.set_yticks(range(len(tasks)), tasks)
    ax.set_xlabel(" · ".join(by))
    ax.set_ylabel("task")
    bar = ax.figure.colorbar(image, ax=ax, shrink=0.85, pad=0.02)
    bar.set_label("success rate (successes / trials)" if k is None else f"pass^{k} (all {k} tries succeed)")
    _title(ax, title, f"Per-task success by {' · '.join(by)}")
    return ax


def plot_flips(
    data: pd.DataFrame,
    *,
    on: str = "prompt_hash",
    a: object = None,
    b: object = None,
    by: str | Sequence[str] | None = None,
    alpha: float = 0.05,
    infra: str = "exclude",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Per task, the success rate under arm ``a`` and arm ``b`` of column ``on``, joined by a bar.

    ``data``: trial records (then :func:`passk_nb.stats.summary.flips` runs with ``on``, ``a``,
    ``b``, ``by``, ``alpha``) or a frame ``flips`` already returned. Tasks whose change
    is significant after Benjamini–Hochberg (``flip``: q < ``alpha``) get a thick
    vermillion bar and a star; the counts and q-value are written at the right. When
    the trial counts are too small for any task to reach p < ``alpha``, the title says so.

    >>> from passk_nb.data.records import frame_from_records
    >>> df = frame_from_records(
    ...     {"run_id": "r", "suite": "s", "task": task, "trial": i, "model": "toy", "prompt_hash": p,
    ...      "passed": i < c, "outcome": "pass" if i < c else "wrong_state"}
    ...     for p, cs in [("p1", (5, 5)), ("p2", (0, 4))] for task, c in zip("ab", cs) for i in range(5))
    >>> ax = plot_flips(df, a="p1", b="p2")
    >>> [c.get_offsets().shape[0] for c in ax.collections if c.get_gid() == "flips"]  # one flip: task a
    [1]
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    if "successes_a" in data.columns:
        table = data.reset_index(drop=True)
    else:
        if a is None or b is None:
            raise ValueError("give the two arms to compare: a=... and b=... (values of column on=)")
        table = flips(data, on=on, a=a, b=b, by=by, alpha=alpha, infra=infra)
    names = prompt_names(data)
    label_a = "A" if a is None else format_value(on, a, names)
    label_b = "B" if b is None else format_value(on, b, names)
    group_cols = [col for col in table.columns if col not in _FLIP_COLUMNS]
    rows = table["task"].astype(str)
    extra = [col for col in group_cols if col != "task" and table[col].nunique(dropna=False) > 1]
    if extra:
        rows = rows + " · " + group_labels(table, extra, names=names)
    rate_a = table["successes_a"] / table["trials_a"]
    rate_b = table["successes_b"] / table["trials_b"]
    y = np.arange(len(table))[::-1]
    ax = _axes(ax, figsize=(8.0, max(2.5, 0.5 * len(table) + 1.8)))
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
        note = f"{row.successes_a}/{row.trials_a} → {row.successes_b}/{row.trials_b}   q={row.q_value:.2g}"
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
    below_ticks = offset_copy(ax.transAxes, fig=ax.figure, y=-34, units="points")
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        bbox_transform=below_ticks,
        ncol=3,
        frameon=False,
        fontsize="small",
    )
    default = f"Per-task success, {label_a} vs {label_b}"
    if "min_p" in table.columns and (table["min_p"] >= alpha).all():
        default += f"\n(too few trials: no task can reach p < {alpha:g}, whatever the data)"
    _title(ax, title, default)
    return ax


_FLIP_COLUMNS = frozenset(
    {"successes_a", "trials_a", "successes_b", "trials_b", "delta", "p_value", "q_value", "min_p", "flip"}
)


def plot_outcomes(
    data: pd.DataFrame,
    *,
    by: str | Sequence[str] = "model",
    normalize: bool = True,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Stacked horizontal bars: how the trials of each group of ``by`` ended.

    One segment per outcome present in ``data`` (:data:`passk_nb.data.records.OUTCOMES`
    order, fixed colours from :data:`OUTCOME_COLORS`; ``infra_error`` hatched, as it
    is not the agent's fault), as shares of the group's trials (``normalize=True``) or
    counts. Segments wide enough show their count.

    >>> from passk_nb.data.records import frame_from_records
    >>> df = frame_from_records(
    ...     {"run_id": "r", "suite": "s", "task": "t", "trial": i, "model": "toy",
    ...      "passed": o == "pass", "outcome": o}
    ...     for i, o in enumerate(["pass", "pass", "format_error", "wrong_state"]))
    >>> ax = plot_outcomes(df)
    >>> [text.get_text() for text in ax.get_legend().get_texts()]
    ['pass', 'wrong_state', 'format_error']
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    by = as_columns(by)
    missing = [col for col in (*by, "outcome") if col not in data.columns]
    if missing:
        raise ValueError(f"the frame lacks columns {missing}")
    if data.empty:
        raise ValueError("the frame has no trial rows")
    labels = group_labels(data, by)
    table = pd.crosstab(labels.to_numpy(), data["outcome"].to_numpy())
    groups = data[list(by)].drop_duplicates().sort_values(list(by))  # ordered by value, as in the stats
    table = table.reindex(pd.unique(group_labels(groups, by, names=prompt_names(data))))
    present = [o for o in OUTCOMES if o in table.columns] + [o for o in table.columns if o not in OUTCOMES]
    table = table[present]
    totals = table.sum(axis=1)
    shown = table.div(totals, axis=0) if normalize else table
    y = np.arange(len(table))[::-1]
    ax = _axes(ax, figsize=(8.0, max(2.2, 0.55 * len(table) + 1.4)))
    left = np.zeros(len(table))
    for i, outcome in enumerate(present):
        widths = shown[outcome].to_numpy(dtype=float)
        color = OUTCOME_COLORS.get(outcome, PALETTE[i % len(PALETTE)])
        bars = ax.barh(
            y,
            widths,
            left=left,
            color=color,
            edgecolor="white",
            linewidth=0.8,
            label=outcome,
            hatch="//" if outcome == "infra_error" else None,
        )
        for bar, count, width in zip(bars, table[outcome], widths, strict=True):
            if count and width >= (0.05 if normalize else 0.05 * shown.to_numpy().sum(axis=1).max()):
                luminance = _luminance(color)
                ax.text(
                    bar.get_x() + width / 2,
                    bar.get_y() + bar.get_height() / 2,
                    str(count),
                    ha="center",
                    va="center",
                    fontsize="small",
                    color="black" if luminance > 0.5 else "white",
                )
        left += widths
    ax.set_yticks(y, [f"{label} (n={total})" for label, total in totals.items()])
    ax.set_xlabel("share of trials" if normalize else "trials")
    if normalize:
        ax.set_xlim(0, 1)
    _legend_outside(ax, title="outcome")
    _title(ax, title, f"How the trials ended, by {' · '.join(by)}")
    return ax


def figure_png(figure: Figure, dpi: int = 100) -> bytes:
    """The figure as PNG bytes (for widgets and static HTML)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def _is_curve_frame(frame: pd.DataFrame) -> bool:
    return {"k", "metric", "value", "lo", "hi"} <= set(frame.columns)


def _pass_hat_grid(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    out = np.full(n.shape, np.nan)
    ok = np.isfinite(n) & (n >= k)
    out[ok] = pass_hat_k(n[ok].astype(int), c[ok].astype(int), k)
    return out


def _axes(ax: Axes | None, figsize: tuple[float, float] = _FIGSIZE) -> Axes:
    if ax is not None:
        return ax
    _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def _legend_outside(ax: Axes, **options: Any) -> None:
    """The legend to the right of the data, top-aligned, small and frameless."""
    ax.legend(
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        borderaxespad=0,
        frameon=False,
        fontsize="small",
        title_fontsize="small",
        **options,
    )


def _title(ax: Axes, title: str | None, default: str) -> None:
    text = default if title is None else title
    if text:
        ax.set_title(text, loc="left", fontsize="medium")


def _luminance(color: str) -> float:
    r, g, b = (int(color[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.299 * r + 0.587 * g + 0.114 * b
