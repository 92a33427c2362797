"""Design a run and decide it: plan a fixed design from a pilot, or run until the question is decided.

Two chains, each module building on the ones before it: ``question`` → ``sequence`` (the
anytime-valid confidence sequence) → ``decisions`` → ``allocation`` (the allocator and
:class:`Until`, the runner's hook); ``population`` → ``power`` → ``planner`` (:func:`plan`).
The methods: ``docs/methods/sequential.md`` and ``docs/methods/planning.md``.

>>> import pandas as pd
>>> from passk_nb.stats.design import decide
>>> table = pd.DataFrame({"task": list("abcdefgh"), "n": 30, "c": [30] * 7 + [0]})
>>> decide(table, "gate=0.6")["verdict"].iloc[0]
'passes: pass^1 ≥ 0.824 ≥ 0.6'
"""

from passk_nb.stats.design.allocation import Until, allocate, dropped, gains, round_trials, shrink, spread
from passk_nb.stats.design.decisions import (
    Status,
    decide,
    decide_by_round,
    decision,
    fixed_look,
    status,
    trials_by_round,
)
from passk_nb.stats.design.planner import plan, plan_trials
from passk_nb.stats.design.population import (
    Population,
    TwoArms,
    components,
    fixed_floor,
    pilot_population,
    pilot_rho,
    reach,
    shifted,
    two_arms,
)
from passk_nb.stats.design.power import (
    Draws,
    detectable,
    detectable_new,
    gate_halfwidth,
    halfwidths,
    paired_power,
    simulated_power,
)
from passk_nb.stats.design.question import Question, as_question
from passk_nb.stats.design.sequence import Dual, bound, budgets, interval, log_mixture, tilts

__all__ = [
    # the question
    "Question",
    "as_question",
    # the confidence sequence
    "bound",
    "budgets",
    "Dual",
    "interval",
    "log_mixture",
    "tilts",
    # decisions over records
    "decide",
    "decide_by_round",
    "decision",
    "fixed_look",
    "status",
    "Status",
    "trials_by_round",
    # allocation and the runner's hook
    "allocate",
    "gains",
    "round_trials",
    "dropped",
    "shrink",
    "spread",
    "Until",
    # the population model
    "components",
    "fixed_floor",
    "pilot_population",
    "pilot_rho",
    "Population",
    "reach",
    "shifted",
    "two_arms",
    "TwoArms",
    # power and precision
    "detectable",
    "Draws",
    "detectable_new",
    "gate_halfwidth",
    "halfwidths",
    "paired_power",
    "simulated_power",
    # the planner
    "plan",
    "plan_trials",
]
