"""``df.passk`` with ``.plot()``: the statistics of :mod:`passk_nb.stats.accessor` on trial
records, and on a statistic's result the plot made for it (:data:`PLOTS`).

This is the class ``passk_nb`` registers as ``df.passk``; stats' :class:`~passk_nb.stats.result.Result`
draws through it (``passk_nb.curve(df).plot()``), so stats never imports view.

>>> import pandas as pd, passk_nb
>>> df = pd.DataFrame({"task": list("aabb"), "passed": [True, True, True, False]})
>>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
>>> df.passk.curve(by=(), n_boot=0).plot().get_xlabel()
'k (number of tries)'
>>> import matplotlib.pyplot as plt; plt.close("all")
"""

from __future__ import annotations

from typing import Any

import pandas as pd

import passk_nb.view as _face
from passk_nb.stats import accessor as _stats

#: A statistic (``.attrs['statistic']`` of its result) -> the plot of :mod:`passk_nb.view` drawing it.
PLOTS: dict[str, str] = {
    "curve": "plot_curve",
    "summarize": "plot_summary",
    "report_frame": "plot_summary",
    "flips": "plot_flips",
    "counts": "plot_tasks",
    "forecast": "plot_forecast",
    "plan": "plot_plan",
    "rank": "plot_rank",
    "decide_by_round": "plot_rounds",
    "trials_by_round": "plot_round_trials",
    "robustness": "plot_robustness",
    "robustness_tasks": "plot_robustness_tasks",
    "cost_summary": "plot_cost",
    "reliability_card": "plot_card",
    "calibration": "plot_calibration",
    "action_tree": "plot_divergence",
}


class PasskAccessor(_stats.PasskAccessor):
    """``df.passk.<statistic>(...)`` on trial records; ``result.passk.plot(...)`` on a result."""

    def __init__(self, df: pd.DataFrame) -> None:
        if df.attrs.get("statistic"):
            self._df = df  # a statistic's result: it can be drawn
        else:
            super().__init__(df)

    def plot(self, *args: Any, **options: Any) -> Any:
        """Draw this frame, a statistic's result, with the view's plot for its statistic
        (:data:`PLOTS`); ``options`` are that plot's drawing options (``ax=``, ``title=``, ...)."""
        statistic = self._df.attrs.get("statistic")
        if statistic not in PLOTS:
            said = f"a {statistic}() result" if statistic else "trial records (no .attrs['statistic'])"
            raise TypeError(
                f"df.passk.plot() draws a statistic's result; this frame is {said}, which has no plot. "
                f"Compute one first, e.g. df.passk.curve().plot(), or draw with passk_nb.view "
                f"(plots exist for {', '.join(sorted(PLOTS))})"
            )
        return getattr(_face, PLOTS[statistic])(self._df, *args, **options)
