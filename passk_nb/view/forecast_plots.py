"""Plots beyond the trials you ran: the pass^K forecast, the plan, the ranking.

Each function takes the frame its statistic returned (``plot_forecast(passk_nb.forecast(df))``,
or ``passk_nb.forecast(df).plot()``), draws on ``ax`` (a new figure when None) and returns the
Axes. Colours come from the Okabe–Ito palette; groups are labelled by the values that differ
among them, and a figure of one group says once, in its title, what the group is
(:func:`passk_nb.view.labels.figure_labels`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from passk_nb.stats.params import share_docs
from passk_nb.stats.result import result_ci
from passk_nb.view.axes import legend_outside, new_axes, plain_text, require_result, set_title
from passk_nb.view.labels import PALETTE, figure_labels, group_colors


@plain_text
@share_docs
def plot_forecast(
    forecast: pd.DataFrame,
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Observed pass^k (points) and the forecast far beyond n (band, and line where shown), per group.

    The forecast's ``ci`` band wherever it is given, its point as a line only where
    :func:`passk_nb.forecast` shows it (K ≤ n: biased further out, so the
    legend and title say the band is what to read there), a dotted line at its asymptote
    (``share_always``: the share of tasks the model says never fail), thin dashed lines at what
    the data allow without the model (``bound_lo``/``bound_hi``), and the k range beyond the
    trials run shaded and marked "extrapolation". A declined forecast draws only the observed
    points and the bounds, and says why.

    forecast: what :func:`passk_nb.forecast` returned (its level comes from its ``.attrs``).
    {ax}
    {title}

    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> p = np.r_[np.ones(8), rng.beta(3, 1, 16)]
    >>> passed = rng.random((24, 4)) < p[:, None]
    >>> df = pd.DataFrame({"task": np.repeat(np.arange(24), 4), "passed": passed.ravel()})
    >>> df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    >>> from passk_nb.stats.forecast import forecast
    >>> ax = plot_forecast(forecast(df, by=(), n_boot=100))
    >>> ax.get_xscale(), ax.get_ylabel()
    ('log', 'pass^k')
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    from passk_nb.stats.forecast import point_horizon  # here: plot_rank needs no scipy.stats

    data = require_result(forecast, "forecast", "plot_forecast", "passk_nb.forecast(df)")
    ci = result_ci(data, None, "passk_nb.forecast(df)")
    group_cols = _group_columns(data)
    labels, described = figure_labels(data, group_cols)
    ax = new_axes(ax)
    min_n = int(data["min_n"].min())
    k_max = int(data["k"].max())
    if k_max > min_n:
        ax.axvspan(min_n, k_max * 1.15, color="0.93", zorder=0)
        ax.text(min_n * 1.08, 1.02, "extrapolation (k > n)", fontsize="small", color="0.35", va="bottom")
    notes, cut = [], False
    colors = group_colors(labels.nunique())
    for i, (label, rows) in enumerate(data.groupby(labels, sort=False)):
        color = colors[i]
        rows = rows.sort_values("k")
        shown, band = rows["pass^k"].notna(), rows["lo"].notna() & rows["hi"].notna()
        horizon = point_horizon(int(rows["min_n"].iloc[0]))
        hidden = bool((rows["given"] & (rows["k"] > horizon)).any())
        cut |= hidden
        if shown.any():
            name = f"{label} — forecast" + (f" (k ≤ {horizon}; biased beyond)" if hidden else "")
            ax.plot(rows["k"][shown], rows["pass^k"][shown], color=color, label=name)
        if band.any():
            name = f"{label} — {ci:.0%} interval"
            ax.fill_between(
                rows["k"][band], rows["lo"][band], rows["hi"][band], color=color, alpha=0.2, label=name
            )
        if shown.any() or band.any():
            ax.axhline(rows["share_always"].iloc[0], color=color, linestyle=":", linewidth=1)
        elif "note" in rows and rows["note"].iloc[0]:
            notes.append("forecast declined" if described else f"{label}: forecast declined")
        if "bound_lo" in rows and rows["bound_lo"].notna().any():
            for edge in ("bound_lo", "bound_hi"):
                ax.plot(rows["k"], rows[edge], color=color, linestyle="--", linewidth=0.8, alpha=0.7)
        seen = rows["observed"].notna()
        ax.plot(rows["k"][seen], rows["observed"][seen], "o", color=color, label=f"{label} — observed")
    ax.set_xscale("log", base=2)
    ax.set_xlim(0.9, k_max * 1.15)
    ax.set_ylim(0, 1.08)
    ax.set_xlabel("k (number of tries)")
    ax.set_ylabel("pass^k")
    legend_outside(ax)
    default = f"pass^k forecast beyond n (band: {ci:.0%}; dotted: asymptote; dashed: model-free bounds)"
    if cut:
        notes.insert(0, "line: the point, up to k = n; beyond n it is biased: read the band")
    if notes:
        default += "\n" + "; ".join(notes)
    set_title(ax, title, default, note=described)
    return ax


@plain_text
@share_docs
def plot_plan(
    plan: pd.DataFrame,
    *,
    y: str = "halfwidth_new",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """A plan's ``y`` (half-width, detectable difference or power) against trials per task,
    one line per number of tasks.

    plan: what :func:`passk_nb.plan` returned (select rows, such as some numbers of tasks, first).
    y: the column to draw: halfwidth_new, halfwidth_these, mdd_new, mdd_these, power_new, power_these.
    {ax}
    {title}

    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> passed = rng.random((20, 8)) < rng.beta(2, 1, 20)[:, None]
    >>> df = pd.DataFrame({"task": np.repeat(np.arange(20), 8), "passed": passed.ravel()})
    >>> df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    >>> from passk_nb.stats.design.planner import plan
    >>> ax = plot_plan(plan(df, k=2, tasks=[20, 40]))
    >>> len(ax.get_lines())
    2
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    data = require_result(plan, "plan", "plot_plan", "passk_nb.plan(df, k=...)")
    if y not in data.columns:
        raise ValueError(f"y must be a column of the plan, e.g. 'halfwidth_new'; got y={y!r}")
    ax = new_axes(ax)
    for i, (t, rows) in enumerate(data.groupby("tasks", sort=True)):
        rows = rows.sort_values("trials_per_task")
        ax.plot(
            rows["trials_per_task"], rows[y], marker="o", color=PALETTE[i % len(PALETTE)], label=f"{t} tasks"
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("trials per task")
    ax.set_ylabel(y)
    if y.startswith("power"):
        ax.axhline(0.8, color="0.5", linestyle=":", linewidth=1)
        ax.set_ylim(0, 1.02)
    legend_outside(ax)
    set_title(ax, title, f"{y} by trials per task, one line per number of tasks")
    return ax


@plain_text
@share_docs
def plot_rank(
    rank: pd.DataFrame,
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """A forest plot of the arms' pass^k with intervals, best first, coloured by tier (a tier holds
    the arms not shown worse than its top arm; see :func:`~passk_nb.stats.rank.rank`), with each
    arm's rank interval.

    rank: what :func:`passk_nb.rank` returned.
    {ax}
    {title}

    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> p = {"a": 0.9, "b": 0.88, "c": 0.4}
    >>> rows = [(m, t, bool(rng.random() < p[m])) for m in p for t in range(20) for _ in range(4)]
    >>> df = pd.DataFrame(rows, columns=["model", "task", "passed"])
    >>> df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    >>> from passk_nb.stats.rank import rank
    >>> ax = plot_rank(rank(df, k=1, n_boot=200))
    >>> [t.get_text() for t in ax.get_yticklabels()]
    ['a  (rank 1–2)', 'b  (rank 1–2)', 'c  (rank 3–3)']
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    make = "passk_nb.rank(df, on=..., k=...)"
    data = require_result(rank, "rank", "plot_rank", make).sort_values("rank").reset_index(drop=True)
    ax = new_axes(ax, (7.5, 0.45 * len(data) + 1.2))
    y = np.arange(len(data))[::-1]
    for tier in sorted(data["tier"].unique()):
        rows = data["tier"] == tier
        color = PALETTE[(tier - 1) % len(PALETTE)]
        err = np.vstack([data["pass^k"][rows] - data["lo"][rows], data["hi"][rows] - data["pass^k"][rows]])
        ax.errorbar(
            data["pass^k"][rows], y[rows], xerr=err, fmt="o", color=color, capsize=3, label=f"tier {tier}"
        )
    ax.set_yticks(
        y,
        [
            f"{a}  (rank {lo}–{hi})"
            for a, lo, hi in zip(data["arm"], data["rank_lo"], data["rank_hi"], strict=True)
        ],
    )
    ax.set_xlabel(f"pass^{int(data['k'].iloc[0])}")
    ax.set_xlim(-0.02, 1.02)
    legend_outside(ax)
    set_title(ax, title, "Ranking: a tier holds the arms not shown worse than its top arm")
    return ax


def _group_columns(data: pd.DataFrame) -> list[str]:
    """The grouping columns: forecast() puts them before ``k``."""
    return [str(col) for col in data.columns[: data.columns.get_loc("k")]]
