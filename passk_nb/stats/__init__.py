"""stats: numbers from trials. Every function takes records (a frame, a parquet folder) or the
per-task counts of them, and returns a frame that says how it was computed (``.attrs``).

>>> import passk_nb.stats as stats, pandas as pd
>>> passed = [True, True, True, True, False, True]
>>> trials = pd.DataFrame({"task": ["a"] * 3 + ["b"] * 3, "passed": passed,
...                        "outcome": ["pass" if p else "wrong_state" for p in passed]})
>>> stats.counts(trials, by=())[["task", "n", "c"]].values.tolist()
[['a', 3, 3], ['b', 3, 2]]
>>> round(float(stats.summarize(trials, k=2, by=(), n_boot=0)["pass^k"].iloc[0]), 3)
0.667

The names load on first use: ``import passk_nb.stats`` loads no statistic.
"""

from passk_nb._lazy import lazy_face

_NAMES = {
    # per-task counts, where every analysis starts, and the estimators on them
    "counts": "passk_nb.stats.counts",
    "as_counts": "passk_nb.stats.counts",
    "Counts": "passk_nb.stats.counts",
    "pass_at_k": "passk_nb.stats.estimators",
    "pass_hat_k": "passk_nb.stats.estimators",
    "g_pass_at_k": "passk_nb.stats.noise",
    # how reliable: one configuration, every k
    "summarize": "passk_nb.stats.summary",
    "curve": "passk_nb.stats.summary",
    "consistency": "passk_nb.stats.consistency",
    "consistency_summary": "passk_nb.stats.consistency",
    "noise_floor": "passk_nb.stats.noise",
    # configurations against each other, and the release decision
    "compare": "passk_nb.stats.paired",
    "flips": "passk_nb.stats.paired",
    "rank": "passk_nb.stats.rank",
    "gate": "passk_nb.stats.gate",
    "robustness": "passk_nb.stats.robustness",
    "robustness_tasks": "passk_nb.stats.robustness",
    # how bad the failures are, and every axis on one card
    "safety": "passk_nb.stats.safety",
    "worst_trials": "passk_nb.stats.safety",
    "reliability_card": "passk_nb.stats.card",
    "card_comparison": "passk_nb.stats.card",
    # does the agent know when it is right: its stated (or the derived) confidence against passed
    "predictability": "passk_nb.stats.predictability",
    "predictability_difference": "passk_nb.stats.predictability",
    "calibration": "passk_nb.stats.predictability",
    "agreement_confidence": "passk_nb.stats.predictability",
    # past the trials run, and how many to run
    "forecast": "passk_nb.stats.forecast",
    "plan": "passk_nb.stats.design.planner",
    "plan_trials": "passk_nb.stats.design.planner",
    "Until": "passk_nb.stats.design.allocation",
    "Question": "passk_nb.stats.design.question",
    "decide": "passk_nb.stats.design.decisions",
    "decide_by_round": "passk_nb.stats.design.decisions",
    "trials_by_round": "passk_nb.stats.design.decisions",
    "allocate": "passk_nb.stats.design.allocation",
    # why trials fail, and what they cost
    "divergence": "passk_nb.stats.divergence",
    "action_tree": "passk_nb.stats.divergence",
    "claimed_unperformed_action": "passk_nb.stats.flags",
    "with_cost": "passk_nb.stats.cost",
    "cost_summary": "passk_nb.stats.cost",
    # the warning a statistic gives on too few tasks
    "TooFewTasksWarning": "passk_nb.stats.params",
}

__all__ = [*_NAMES]
__getattr__ = lazy_face(__name__, _NAMES)
