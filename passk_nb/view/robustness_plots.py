"""Robustness figures: what each fault plan (or perturbation) costs, from :mod:`passk_nb.stats.robustness`.

:func:`plot_robustness` draws the paired difference of each arm against the base with the
intervals :func:`~passk_nb.stats.robustness.robustness` returned; :func:`plot_robustness_tasks`
a heatmap of arm × task of the per-task change :func:`~passk_nb.stats.robustness.robustness_tasks`
returned. Neither computes a number.

>>> import pandas as pd
>>> rows = [{"task": t, "model": "m", "faults": f, "passed": ok}
...         for t in "abcde" for f in ("none", "noop:*", "timeout:*")
...         for ok in (True, f == "none" or t not in "ab")]
>>> df = pd.DataFrame(rows)
>>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
>>> from passk_nb.stats.robustness import robustness, robustness_tasks
>>> ax = plot_robustness(robustness(df, k=2, n_boot=0))
>>> [t.get_text() for t in ax.get_yticklabels()]
['noop:*', 'timeout:*']
>>> ax = plot_robustness_tasks(robustness_tasks(df, k=2))
>>> ax.images[0].get_array().shape
(2, 5)
>>> import matplotlib.pyplot as plt; plt.close("all")
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from passk_nb.stats.params import share_docs
from passk_nb.view.axes import new_axes, require_result, set_title
from passk_nb.view.labels import PALETTE

_ARM_NAMES = {"faults": "fault plan", "perturbation": "perturbation"}


def _arm_column(frame: pd.DataFrame) -> str:
    for on in ("faults", "perturbation"):
        if on in frame.columns:
            return on
    raise ValueError("the frame has neither a faults nor a perturbation column: pass robustness()'s frame")


def _row_labels(frame: pd.DataFrame, on: str, skip: Sequence[str]) -> pd.Series:
    """Each row's arm, with the groups that differ (e.g. the model) in front."""
    labels = frame[on].astype(str)
    groups = [
        col
        for col in frame.columns
        if col not in skip and frame[col].dtype == object and frame[col].nunique(dropna=False) > 1
    ]
    for col in reversed(groups):
        labels = frame[col].astype(str) + " · " + labels
    return labels


@share_docs
def plot_robustness(
    robustness: pd.DataFrame,
    *,
    metric: str = "pass^k",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """The paired difference of ``metric`` under each arm against the base, with its interval.

    robustness: what :func:`passk_nb.robustness` returned.
    metric: ``"pass^k"`` (default) or ``"pass@k"``.
    {ax}
    {title}

    One horizontal bar per arm (and group): the mean per-task difference (arm − base); the thick
    line is the interval for new tasks like these (``lo``–``hi``; none where it was declined), the
    thin one the interval for these tasks re-rolled (``fixed_lo``–``fixed_hi``). The number of
    tasks that break (a lower per-task value under the arm) is written at the right.
    """
    if metric not in ("pass^k", "pass@k"):
        raise ValueError(f"metric must be 'pass^k' or 'pass@k'; got {metric!r}")
    table = require_result(robustness, "robustness", "plot_robustness", "passk_nb.robustness(df, k=...)")
    arm = _arm_column(table)
    rows = table[table["metric"] == metric].reset_index(drop=True)
    if rows.empty:
        raise ValueError(f"the robustness frame has no {metric} rows")
    skip = {"metric", "ci_method", "broken", "fault_class", arm}
    labels = _row_labels(rows, arm, list(skip))
    y = np.arange(len(rows))[::-1]
    ax = new_axes(ax, figsize=(8.0, max(2.2, 0.45 * len(rows) + 1.6)))
    diff = rows["diff"].to_numpy(float)
    colors = [PALETTE[3] if d < 0 else PALETTE[0] for d in diff]
    ax.barh(y, diff, color=colors, alpha=0.55, height=0.6, label="diff")
    if {"fixed_lo", "fixed_hi"} <= set(rows.columns):
        ax.hlines(y, rows["fixed_lo"], rows["fixed_hi"], color="0.35", linewidth=1, gid="fixed")
    ax.hlines(y, rows["lo"], rows["hi"], color="0.1", linewidth=3, gid="interval")
    ax.axvline(0, color="0.5", linewidth=0.8)
    ax.set_yticks(y, labels.tolist())
    k_value = int(rows["k"].iloc[0]) if "k" in rows else None
    name = metric.replace("k", str(k_value)) if k_value is not None else metric
    ax.set_xlabel(f"{name} under the arm − {name} at the base (per-task mean)")
    ax.set_xlim(-1.05, 1.05)
    for yi, broken, n_tasks in zip(y, rows["n_broken"], rows.get("n_tasks", rows["n_broken"]), strict=True):
        ax.annotate(
            f"{int(broken)}/{int(n_tasks)} tasks break",
            (1.0, yi),
            xycoords=("axes fraction", "data"),
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
            fontsize="small",
        )
    set_title(ax, title, f"What each {_ARM_NAMES[arm]} costs ({name}, paired by task)")
    return ax


@share_docs
def plot_robustness_tasks(
    tasks: pd.DataFrame,
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """A heatmap of arm × task: each task's pass^k under the arm minus its pass^k at the base.

    tasks: what :func:`passk_nb.stats.robustness_tasks` returned.
    {ax}
    {title}

    Red cells are tasks that break under the arm (−1: it passed every time and now never does),
    blue ones tasks that gained; each cell is written as ``base → arm``. Grey: not measured.
    """
    make = "passk_nb.stats.robustness_tasks(df, k=...)"
    table = require_result(tasks, "robustness_tasks", "plot_robustness_tasks", make)
    arm = _arm_column(table)
    skip = {"task", "fault_class", "breaks", arm}
    table = table.assign(_row=_row_labels(table, arm, list(skip)))
    rows = list(dict.fromkeys(table["_row"]))
    columns = sorted(table["task"].astype(str).unique())
    delta = table.pivot_table(index="_row", columns="task", values="delta", aggfunc="first")
    delta = delta.reindex(index=rows, columns=columns)
    base_values = table.pivot_table(index="_row", columns="task", values="pass^k_base", aggfunc="first")
    arm_values = table.pivot_table(index="_row", columns="task", values="pass^k", aggfunc="first")
    ax = new_axes(ax, figsize=(max(5.0, 1.1 * len(columns) + 3), max(2.2, 0.55 * len(rows) + 1.6)))
    import matplotlib.pyplot as plt

    colormap = plt.get_cmap("RdBu").with_extremes(bad="0.92")
    image = ax.imshow(
        np.ma.masked_invalid(delta.to_numpy(float)), cmap=colormap, vmin=-1, vmax=1, aspect="auto"
    )
    for i, row in enumerate(rows):
        for j, task in enumerate(columns):
            value = delta.loc[row, task]
            if pd.isna(value):
                continue
            text = f"{base_values.loc[row, task]:.2f}→{arm_values.loc[row, task]:.2f}"
            ax.text(
                j,
                i,
                text,
                ha="center",
                va="center",
                fontsize="x-small",
                color="white" if abs(value) > 0.6 else "black",
            )
    ax.set_xticks(np.arange(len(columns)), columns, rotation=30, ha="right")
    ax.set_yticks(np.arange(len(rows)), rows)
    ax.figure.colorbar(image, ax=ax, label="pass^k: arm − base", shrink=0.8)
    set_title(ax, title, f"Per task: pass^k under each {_ARM_NAMES[arm]} against the base")
    return ax
