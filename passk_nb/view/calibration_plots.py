"""The reliability diagram: :func:`plot_calibration` draws what
:func:`passk_nb.stats.calibration` returned, per configuration and confidence bin.

Each point is a bin: its mean confidence against its pass rate, with the interval the statistic
computed (none where it declined one), its size growing with the bin's trials. A calibrated agent's
points lie on the diagonal; below it the agent is overconfident.

>>> import numpy as np, pandas as pd
>>> from passk_nb.stats.predictability import calibration
>>> df = pd.DataFrame({"task": list("aabbccdd"), "confidence": [0.9, 0.8, 0.2, 0.3, 0.95, 0.85, 0.1, 0.9],
...                    "passed": [True, True, False, True, True, False, False, True]})
>>> df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
>>> ax = plot_calibration(calibration(df, by=()))
>>> ax.get_xlabel(), len(ax.containers)
('stated confidence', 1)
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


@plain_text
@share_docs
def plot_calibration(result: pd.DataFrame, *, ax: Axes | None = None, title: str | None = None) -> Axes:
    """The reliability diagram: per configuration, each confidence bin's pass rate (with its
    interval) against its mean confidence, and the diagonal a calibrated agent follows.

    result: what :func:`passk_nb.stats.calibration` returned.
    {ax}
    {title}

    Vertical bars are the ``ci`` interval of the bin's pass rate as the statistic computed it (none
    where it declined one: a bin holding one task's trials); marker area grows with the bin's
    trials. Each configuration is one errorbar container labelled with it.
    """
    make = "passk_nb.stats.calibration(df)"
    frame = require_result(result, "calibration", "plot_calibration", make)
    group_by = result_by(frame, make)
    ci = result_ci(frame, None, make)
    labels, note = figure_labels(
        frame, group_by, shown=label_columns(frame, group_by), names=prompt_names(frame)
    )
    ax = new_axes(ax)
    ax.plot([0, 1], [0, 1], color="0.6", linestyle="--", linewidth=1, label="calibrated")
    groups = list(dict.fromkeys(labels.astype(str)))
    biggest = max(float(frame["n_trials"].max()), 1.0) if len(frame) else 1.0
    for color, label in zip(group_colors(len(groups)), groups, strict=True):
        part = frame[(labels.astype(str) == label).to_numpy()].sort_values("bin")
        x, y = part["mean_confidence"].to_numpy(float), part["pass_rate"].to_numpy(float)
        below = np.where(part["lo"].notna(), y - part["lo"].to_numpy(float), 0.0)
        above = np.where(part["hi"].notna(), part["hi"].to_numpy(float) - y, 0.0)
        ax.errorbar(x, y, yerr=[below, above], fmt="-", color=color, alpha=0.8, capsize=3, label=label)
        sizes = 20 + 180 * part["n_trials"].to_numpy(float) / biggest
        ax.scatter(x, y, s=sizes, color=color, zorder=3, edgecolor="white")
    source = str(frame.attrs.get("source", "stated"))
    ax.set_xlabel(f"{source} confidence")
    ax.set_ylabel(f"pass rate ({ci:.0%} interval)")
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    ax.set_aspect("equal", adjustable="box")
    if len(groups) > 1:
        legend_outside(ax)
    set_title(ax, title, "Reliability diagram: does the agent know when it is right?", note=note)
    return ax
