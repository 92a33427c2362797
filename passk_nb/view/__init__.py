"""view: tables, plots and widgets of what :mod:`passk_nb.stats` returns. A plot draws numbers
a statistic computed (never its own): it takes that statistic's result and drawing options only
(``ax=``, ``title=``, ...) and returns its axes. ``result.plot()`` picks the plot for a result.

>>> import passk_nb.stats as stats, passk_nb.view as view, pandas as pd
>>> passed = [True, True, True, True, False, True]
>>> trials = pd.DataFrame({"task": ["a"] * 3 + ["b"] * 3, "passed": passed,
...                        "outcome": ["pass" if p else "wrong_state" for p in passed]})
>>> ax = view.plot_curve(stats.curve(trials, by=(), n_boot=0))  # or stats.curve(...).plot()
>>> ax.get_xlabel()
'k (number of tries)'
>>> import matplotlib.pyplot as plt; plt.close("all")

The names load on first use: ``import passk_nb.view`` loads no matplotlib.
"""

from passk_nb._lazy import lazy_face

_NAMES = {
    # reliability against k, per task, per outcome
    "plot_curve": "passk_nb.view.plots",
    "plot_tasks": "passk_nb.view.plots",
    "plot_outcomes": "passk_nb.view.plots",
    "plot_flips": "passk_nb.view.plots",
    "plot_summary": "passk_nb.view.plots",
    # beyond the trials run: forecast, plan, rank, rounds
    "plot_forecast": "passk_nb.view.forecast_plots",
    "plot_plan": "passk_nb.view.forecast_plots",
    "plot_rank": "passk_nb.view.forecast_plots",
    "plot_rounds": "passk_nb.view.sequential_plots",
    "plot_round_trials": "passk_nb.view.sequential_plots",
    # faults and rewordings, failure paths, cost
    "plot_robustness": "passk_nb.view.robustness_plots",
    "plot_robustness_tasks": "passk_nb.view.robustness_plots",
    "plot_divergence": "passk_nb.view.divergence_plots",
    "plot_cost": "passk_nb.view.cost_plots",
    # every axis of reliability on one card
    "plot_card": "passk_nb.view.card",
    "card_html": "passk_nb.view.card",
    "card_table": "passk_nb.view.card",
    # does the agent know when it is right: the reliability diagram
    "plot_calibration": "passk_nb.view.calibration_plots",
    # tables
    "summary_table": "passk_nb.view.tables",
    # widgets: filter and read the trials in a notebook
    "explore": "passk_nb.view.widgets",
    "browse_transcripts": "passk_nb.view.widgets",
    "show_transcript": "passk_nb.view.widgets",
    "compare_transcripts": "passk_nb.view.widgets",
}

__all__ = [*_NAMES]
__getattr__ = lazy_face(__name__, _NAMES)
