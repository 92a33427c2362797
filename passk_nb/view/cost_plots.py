"""The cost of reliability: :func:`plot_cost` puts pass^k beside what it costs, per configuration.

The numbers are :func:`passk_nb.stats.cost.cost_summary`'s: a trial's cost is its token
counts at the prices you give (or the cost its backend reported, or its wall time for a
local model without prices), computed at analysis time and never invented; trials without
token counts are left out of the mean and configurations without any are named on the
figure, not drawn at zero.

>>> import pandas as pd
>>> df = pd.DataFrame({"task": list("aabb") * 2, "model": ["cheap"] * 4 + ["dear"] * 4,
...                    "passed": [True, False, True, True] + [True] * 4,
...                    "input_tokens": 1000, "output_tokens": 100})
>>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
>>> from passk_nb.stats.cost import cost_summary, with_cost
>>> priced = with_cost(df, prices={"cheap": (0.1, 0.4), "dear": (3.0, 15.0)})
>>> ax = plot_cost(cost_summary(priced, k=2, n_boot=0))
>>> [(c.get_label(), c.lines[0].get_xdata()[0]) for c in ax.containers]
[('cheap', 0.00056), ('dear', 0.009)]
>>> import matplotlib.pyplot as plt; plt.close("all")
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from passk_nb.stats.params import share_docs
from passk_nb.stats.result import result_by, result_ci
from passk_nb.view.axes import label_columns, legend_outside, new_axes, plain_text, require_result, set_title
from passk_nb.view.labels import figure_labels, group_colors, prompt_names

#: What the x axis can show: the cost of one trial, of k trials of one task, of one reliable success.
X_CHOICES = ("trial", "task", "reliable_success")


def _unit(measure: str) -> str:
    return {"cost_usd": "USD", "latency_s": "seconds of wall time"}.get(measure, measure)


@plain_text
@share_docs
def plot_cost(
    cost: pd.DataFrame,
    *,
    x: str = "reliable_success",
    logx: bool | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """pass^k (with its interval) against what it costs: one point per configuration.

    cost: what :func:`passk_nb.stats.cost_summary` returned (its k, groups and measure, the
    per-trial column such as ``cost_usd`` or ``latency_s``, come from the frame).
    x: ``"reliable_success"`` (default): the expected spend until a task succeeds k times in
    a row, k × cost per trial / pass^k, with its interval from pass^k's (horizontal bars);
    ``"trial"``: the mean cost of one trial; ``"task"``: of k trials of one task.
    logx: a log-scale cost axis (default: when the costs span more than a factor of 20).
    {ax}
    {title}

    Vertical bars are the ``ci`` interval of pass^k for new tasks like these (none where it
    was declined: too few tasks); on the reliable-success axis the horizontal bars are the
    same interval turned into cost, and a dotted arrow to the right edge means it has no
    upper end (the pass^k interval reaches 0). Configurations without any measured trial (no token
    counts, or no price for their model) and, on the reliable-success axis, those that never
    passed k in a row (an infinite cost) are not drawn; a note under the axes names them.
    Each drawn point is one errorbar container labelled with its configuration.
    """
    if x not in X_CHOICES:
        raise ValueError(f"x={x!r}: choose one of {', '.join(map(repr, X_CHOICES))}")
    make = "passk_nb.stats.cost_summary(df, k=...)"
    summary = require_result(cost, "cost_summary", "plot_cost", make)
    k = int(summary.attrs["k"])
    measure = str(summary.attrs.get("measure", "cost_usd"))
    group_by = result_by(summary, make)
    ci = result_ci(summary, None, make)
    names = prompt_names(summary)
    shown_by = label_columns(summary, group_by)
    labelled, described = figure_labels(summary, group_by, shown=shown_by, names=names)
    labels = labelled.tolist()
    column = {"trial": "per_trial", "task": "per_trial", "reliable_success": "per_reliable_success"}[x]
    scale = float(k) if x == "task" else 1.0
    ax = new_axes(ax, figsize=(7.5, 4.2))
    left_out: list[str] = []
    drawn: list[float] = []
    arrows: list[tuple[float, float, str]] = []
    colors = group_colors(len(labels))
    for i, (row, label) in enumerate(zip(summary.to_dict("records"), labels, strict=True)):
        if not row["n_measured"]:
            left_out.append(f"{label} (no {'token counts or price' if measure == 'cost_usd' else measure})")
            continue
        value = float(row[column]) * scale
        if not np.isfinite(value):
            left_out.append(f"{label} (pass^{k} = 0: never {k} in a row)")
            continue
        y, lo, hi = float(row["pass^k"]), row["pass^k_lo"], row["pass^k_hi"]
        yerr = None if pd.isna(lo) else np.array([[y - float(lo)], [float(hi) - y]])
        xerr = None
        if x == "reliable_success" and not pd.isna(row.get("per_reliable_success_lo")):
            x_lo, x_hi = float(row["per_reliable_success_lo"]), float(row["per_reliable_success_hi"])
            unbounded = not np.isfinite(x_hi)  # the pass^k interval reaches 0: no upper end
            xerr = np.array([[value - x_lo], [0.0 if unbounded else x_hi - value]])
            if unbounded:
                arrows.append((value, y, colors[i]))
        partial = int(row["n_measured"]) < int(row["trials"])
        text = label + (f" (cost from {int(row['n_measured'])} trials)" if partial else "")
        ax.errorbar(
            [value],
            [y],
            yerr=yerr,
            xerr=xerr,
            fmt="o",
            color=colors[i],
            capsize=3,
            markersize=7,
            label=text,
        )
        drawn.append(value)
    unit = _unit(measure)
    axis = {
        "trial": f"mean cost of one trial ({unit})",
        "task": f"cost of {k} trials of one task ({unit})",
        "reliable_success": f"cost of one reliable success: {k} × per trial / pass^{k} ({unit})",
    }[x]
    ax.set_xlabel(axis)
    ax.set_ylabel(f"pass^{k} (all {k} tries succeed)")
    ax.set_ylim(-0.03, 1.03)
    positive = [v for v in drawn if v > 0]
    if logx is None:
        logx = len(positive) > 1 and max(positive) / min(positive) > 20
    if logx and positive:
        ax.set_xscale("log")
    elif drawn:
        ax.margins(x=0.08)
        ax.set_xlim(left=0)
    for value, y, color in arrows:  # drawn after the limits are set, to reach the right edge
        ax.annotate(
            "",
            xy=(1.0, y),
            xycoords=("axes fraction", "data"),
            xytext=(value, y),
            arrowprops={"arrowstyle": "->", "color": color, "linestyle": ":"},
        )
    if left_out:
        ax.annotate(
            "not drawn: " + "; ".join(left_out),
            (0, 0),
            xycoords="axes fraction",
            xytext=(0, -38),
            textcoords="offset points",
            fontsize="small",
            color="0.35",
            va="top",
        )
    if drawn:
        legend_outside(ax, title=f"bars: {ci:.0%} interval of pass^{k}, new tasks")
    set_title(ax, title, f"What reliability costs: pass^{k} against the cost of {_what(x, k)}", described)
    return ax


def _what(x: str, k: int) -> str:
    return {"trial": "a trial", "task": f"{k} trials of a task", "reliable_success": "one reliable success"}[
        x
    ]
