"""Plots of a run that stopped when its question was answered (``run(..., until=)``).

Each takes the frame its statistic returned (:func:`~passk_nb.stats.design.decisions.decide_by_round`,
:func:`~passk_nb.stats.design.decisions.trials_by_round`), draws on ``ax`` and returns it.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes

from passk_nb.stats import design as _design
from passk_nb.stats.result import result_by
from passk_nb.view.axes import legend_outside, new_axes, plain_text, require_result, set_title
from passk_nb.view.labels import figure_labels, group_colors


@plain_text
def plot_rounds(
    path: pd.DataFrame,
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """The anytime-valid interval after each round against the trials spent, per configuration:
    one bar per round (dotted lines join its ends), the estimate as points, the round where it was decided
    ringed, and the gate (or the precision asked) as a reference.

    path: what :func:`passk_nb.stats.decide_by_round` returned (the question comes from its ``.attrs``).

    >>> import pandas as pd
    >>> rows = [{"task": t, "trial": i, "round": 0 if i < 2 else 1, "passed": True, "outcome": "pass"}
    ...         for t in "abcdef" for i in range(2 if t in "ab" else 6)]
    >>> from passk_nb.stats.design.decisions import decide_by_round, trials_by_round
    >>> ax = plot_rounds(decide_by_round(pd.DataFrame(rows), "gate=0.6"))
    >>> [round(y, 1) for y in ax.get_lines()[-1].get_ydata()]  # the gate's line
    [0.6, 0.6]
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    make = "passk_nb.stats.decide_by_round(df, question)"
    path = require_result(path, "decide_by_round", "plot_rounds", make)
    q = _design.as_question(path.attrs["question"])
    keys = list(result_by(path, make))
    labels, described = figure_labels(path, keys)
    ax = new_axes(ax)
    colors = group_colors(labels.nunique())
    for i, (label, rows) in enumerate(path.groupby(labels, sort=False)):
        rows = rows.sort_values("round")
        color = colors[i]
        ax.plot(rows["trials"], rows["lo"], color=color, linewidth=1, linestyle=":")
        ax.plot(rows["trials"], rows["hi"], color=color, linewidth=1, linestyle=":")
        ax.vlines(rows["trials"], rows["lo"], rows["hi"], color=color, linewidth=6, alpha=0.3)
        ax.plot(rows["trials"], rows["estimate"], "o", color=color, label=f"{label} — estimate")
        first = rows[rows["decided"]].head(1)
        if len(first):
            ax.plot(
                first["trials"],
                first["estimate"],
                "o",
                markersize=12,
                markerfacecolor="none",
                color=color,
                label=f"{label} — decided (round {int(first['round'].iloc[0])})",
            )
    ax.set_xlabel("usable trials spent")
    ax.set_ylabel(f"pass^{q.k}" if q.kind != "compare" else f"pass^{q.k}: {q.b} − {q.a}")
    if q.kind == "gate":
        ax.axhline(float(q.gate or 0), color="0.3", linestyle="--", linewidth=1, label=f"gate {q.gate}")
    elif q.kind == "compare":
        ax.axhline(0.0, color="0.3", linestyle="--", linewidth=1, label="no difference")
    legend_outside(ax)
    scope = "valid at every look" if q.final is None else f"anytime-valid before n = {q.final}"
    set_title(ax, title, f"{q}: interval {scope}, after each round", note=described)
    return ax


@plain_text
def plot_round_trials(
    trials: pd.DataFrame,
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Where a run with ``until=`` spent its trials: usable trials per task, stacked by round.

    trials: what :func:`passk_nb.stats.trials_by_round` returned.

    >>> import pandas as pd
    >>> rows = [{"task": t, "trial": i, "round": min(i, 1), "passed": True, "outcome": "pass"}
    ...         for t, n in (("a", 1), ("b", 3)) for i in range(n)]
    >>> from passk_nb.stats.design.decisions import trials_by_round
    >>> ax = plot_round_trials(trials_by_round(pd.DataFrame(rows)))
    >>> [round(p.get_height()) for p in ax.patches]
    [1, 1, 0, 2]
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    make = "passk_nb.stats.trials_by_round(df)"
    trials = require_result(trials, "trials_by_round", "plot_round_trials", make)
    keys = list(result_by(trials, make))
    labels, described = figure_labels(trials, keys)
    cells = (
        trials["task"].astype(str)
        if described or not keys
        else labels.astype(str) + " · " + trials["task"].astype(str)
    )
    table = trials.assign(_cell=cells).pivot_table(
        index="_cell", columns="round", values="trials", aggfunc="sum", fill_value=0, sort=False
    )
    ax = new_axes(ax)
    colors = group_colors(len(table.columns))
    bottom = pd.Series(0, index=table.index, dtype=float)
    for i, r in enumerate(table.columns):
        ax.bar(range(len(table)), table[r], bottom=bottom, color=colors[i], label=f"round {r}")
        bottom = bottom + table[r]
    ax.set_xticks(range(len(table)), table.index, rotation=45, ha="right", fontsize="small")
    ax.set_ylabel("usable trials")
    legend_outside(ax)
    set_title(ax, title, "trials per task, by the round that ran them", note=described)
    return ax
