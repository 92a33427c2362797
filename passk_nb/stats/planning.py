"""Plan a run: how many tasks and trials answer the question, and what they cost.

The suite's pass^k estimate (the mean over T tasks of the unbiased per-task value X_t at n
trials) has two variance components:

- between tasks: Var(p^k) over the population of tasks (shrinks only with more tasks);
- within a task: E[Var(X_t | p_t)], the binomial noise of n trials (shrinks with more trials).

"New tasks like these" intervals have variance (between + within) / T; "these tasks, re-rolled"
intervals have within / T. Both components are computed exactly (no simulation) from a
population of tasks: the mixture :func:`passk_nb.stats.forecast.fit_mixture` fits to the pilot
(always + never + Beta), or, when the pilot cannot identify it, the pilot's own tasks at the
shrunk p̃ = (c + ½) / (n + 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from passk_nb.stats.checks import check_k
from passk_nb.stats.counts import counts
from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.forecast import Mixture, fit_mixture, unidentified
from passk_nb.stats.params import CI, INFRA, default_by, share_docs

#: Default power and two-sided test level of the detectable difference.
POWER = 0.8
ALPHA = 0.05


@dataclass(frozen=True)
class Population:
    """Task success probabilities: a :class:`Mixture`, or equally weighted atoms ``p``."""

    mixture: Mixture | None = None
    atoms: np.ndarray | None = None

    def moment(self, j: int) -> float:
        """E[p^j]."""
        if self.mixture is not None:
            return float(self.mixture.pass_hat(j))
        assert self.atoms is not None
        return float(np.mean(self.atoms**j))

    def pmf(self, n: int) -> np.ndarray:
        """P(c successes of n) for c = 0..n, over the population."""
        c = np.arange(n + 1)
        if self.mixture is not None:
            m = self.mixture
            out = (
                m.share_flaky * sps.betabinom.pmf(c, n, m.alpha, m.beta)
                if m.share_flaky > 0
                else np.zeros(n + 1)
            )
            out[n] += m.share_always
            out[0] += m.share_never
            return out
        assert self.atoms is not None
        return sps.binom.pmf(c[None, :], n, self.atoms[:, None]).mean(0)


def components(pop: Population, k: int, n: int) -> tuple[float, float, float]:
    """(mean, between, within) of the per-task unbiased pass^k at n trials.

    mean = E[p^k]; between = Var(p^k); within = E[Var(X | p)] = Σ_c P(c) X_c² − E[p^2k].

    >>> pop = Population(mixture=Mixture(0.0, 0.0, 1.0, 1.0))  # uniform p, k = 1: X = c/n
    >>> [round(v, 6) for v in components(pop, 1, 4)]  # within = E[p(1-p)]/n = (1/6)/4
    [0.5, 0.083333, 0.041667]
    """
    x = np.asarray(pass_hat_k(n, np.arange(n + 1), k), dtype=float)
    second = pop.moment(2 * k)
    mean = pop.moment(k)
    within = float(np.sum(pop.pmf(n) * x**2) - second)
    return mean, max(second - mean**2, 0.0), max(within, 0.0)


def halfwidth_new(between: float, within: float, tasks: int, ci: float = CI) -> float:
    """Half-width of the Student-t "new tasks" interval of the suite mean."""
    return float(sps.t.ppf((1 + ci) / 2, tasks - 1) * np.sqrt((between + within) / tasks))


def halfwidth_these(within: float, tasks: int, ci: float = CI) -> float:
    """Half-width of the "these tasks, re-rolled" interval (normal, fixed tasks)."""
    return float(sps.norm.ppf((1 + ci) / 2) * np.sqrt(within / tasks))


def paired_power(
    diff: float, var_diff: float, tasks: int, alpha: float = ALPHA, new_tasks: bool = True
) -> float:
    """Power of the two-sided paired test of a difference ``diff`` in suite pass^k.

    ``var_diff`` is the variance of one task's difference (between + both arms' within);
    new tasks: paired t-test over tasks (noncentral t); these tasks: z-test.

    >>> round(paired_power(0.0, 0.04, 30), 3)  # no difference: the test's level
    0.05
    """
    se = np.sqrt(var_diff / tasks)
    if se == 0:
        return 1.0 if diff != 0 else alpha
    if new_tasks:
        df = tasks - 1
        crit = sps.t.ppf(1 - alpha / 2, df)
        nc = diff / se
        return float(sps.nct.sf(crit, df, nc) + sps.nct.cdf(-crit, df, nc))
    crit = sps.norm.ppf(1 - alpha / 2)
    return float(sps.norm.sf(crit - diff / se) + sps.norm.cdf(-crit - diff / se))


def detectable(
    var_diff: float, tasks: int, alpha: float = ALPHA, power: float = POWER, new_tasks: bool = True
) -> float:
    """Smallest difference the paired test detects with ``power`` (t quantiles for new tasks)."""
    if new_tasks:
        df = tasks - 1
        factor = sps.t.ppf(1 - alpha / 2, df) + sps.t.ppf(power, df)
    else:
        factor = sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)
    return float(factor * np.sqrt(var_diff / tasks))


def pilot_population(n: np.ndarray, c: np.ndarray) -> Population:
    """The mixture fitted to the pilot, or its tasks at p̃ = (c + ½)/(n + 1) when unidentified."""
    if unidentified(n, c) is None:
        return Population(mixture=fit_mixture(n, c))
    return Population(atoms=(c + 0.5) / (n + 1))


@share_docs
def plan(
    pilot: pd.DataFrame,
    *,
    k: int = 1,
    tasks: Sequence[int] | None = None,
    trials: Sequence[int] | None = None,
    diff: float = 0.10,
    power: float = POWER,
    alpha: float = ALPHA,
    rho: float = 0.5,
    budget: int | None = None,
    price_in: float | None = None,
    price_out: float | None = None,
    concurrency: int = 1,
    by: str | Sequence[str] | None = None,
    ci: float = CI,
    infra: str = INFRA,
) -> pd.DataFrame:
    """How many tasks and trials answer the question, and what each plan costs.

    From pilot records of one configuration, returns one row per plan (``tasks`` T,
    ``trials_per_task`` n) with:

    - ``halfwidth_new`` / ``halfwidth_these``: predicted ``ci`` half-widths of the suite's pass^k
      for "new tasks like these" (Student t over tasks) and "these tasks, re-rolled";
    - ``mdd_new`` / ``mdd_these``: the smallest paired difference in pass^k between two arms
      (prompts, models) the plan detects with ``power`` at two-sided level ``alpha``, and
      ``power_new`` / ``power_these`` to detect ``diff``. Two arms are assumed to share the
      pilot's population of tasks with correlation ``rho`` of p^k between arms across tasks
      (the "these tasks" question does not depend on it);
    - ``trials_needed_these``: the trials per task that detect ``diff`` with these T tasks
      (NaN when no n ≤ 1000 does);
    - ``trials``, ``input_tokens``, ``output_tokens`` (pilot means per trial × trials),
      ``cost_usd`` (prices per million tokens, NaN without them) and ``wall_s`` (mean pilot
      latency × trials / ``concurrency``);
    - with ``budget`` (total trials): the splits of it into T × n, ``best`` marking the
      narrowest ``halfwidth_new``.

    ``between`` and ``within`` are the two variance components per task (see the module).

    {df}
    {k}
    tasks: numbers of tasks to plan for (default: the pilot's T, 2T, 4T).
    trials: trials per task to plan for (default k, 2k, 4k, 8k, 16k).
    {by}
    {ci}
    {infra}

    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> p = rng.beta(2, 1, 30)
    >>> passed = rng.random((30, 8)) < p[:, None]
    >>> pilot = pd.DataFrame({"task": np.repeat(np.arange(30), 8), "passed": passed.ravel()})
    >>> pilot["outcome"] = np.where(pilot["passed"], "pass", "wrong_state")
    >>> out = plan(pilot, k=2, tasks=[30, 60], trials=[4, 16])
    >>> out[["tasks", "trials_per_task", "trials"]].values.tolist()
    [[30, 4, 120], [30, 16, 480], [60, 4, 240], [60, 16, 960]]
    >>> bool(out["halfwidth_new"].is_monotonic_decreasing)
    True
    """
    check_k(k)
    for name, value in (("power", power), ("alpha", alpha), ("ci", ci)):
        if not 0 < value < 1:
            raise ValueError(f"{name} must be between 0 and 1; got {name}={value}")
    if not -1 <= rho <= 1:
        raise ValueError(f"rho is a correlation between -1 and 1; got rho={rho}")
    by_ = default_by(pilot, by)
    table = counts(pilot, by=by_, infra=infra)
    table = table[table["n"] > 0]
    if by_ and len(table[list(by_)].drop_duplicates()) > 1:
        groups = table[list(by_)].drop_duplicates().to_dict("records")
        raise ValueError(
            f"the pilot holds {len(groups)} configurations ({groups[:3]}...); plan one at a time: "
            "filter the frame, or pass by=() to pool them on purpose"
        )
    n, c = table["n"].to_numpy(), table["c"].to_numpy()
    pop = pilot_population(n, c)
    per_trial = _per_trial(pilot)
    if budget is not None:
        grid = _splits(budget, k, n.size)
    else:
        tasks_ = list(tasks) if tasks is not None else [n.size, 2 * n.size, 4 * n.size]
        trials_ = list(trials) if trials is not None else [k * m for m in (1, 2, 4, 8, 16)]
        grid = [(t, m) for t in tasks_ for m in trials_]
    rows = []
    for t, m in grid:
        if t < 2 or m < k:
            raise ValueError(
                f"a plan needs at least 2 tasks and k={k} trials per task; got tasks={t}, trials={m}"
            )
        _, between, within = components(pop, k, m)
        var_new = 2 * (1 - rho) * between + 2 * within
        var_these = 2 * within
        rows.append(
            {
                "tasks": t,
                "trials_per_task": m,
                "trials": t * m,
                "between": between,
                "within": within,
                "halfwidth_new": halfwidth_new(between, within, t, ci),
                "halfwidth_these": halfwidth_these(within, t, ci),
                "mdd_new": detectable(var_new, t, alpha, power, new_tasks=True),
                "mdd_these": detectable(var_these, t, alpha, power, new_tasks=False),
                "power_new": paired_power(diff, var_new, t, alpha, new_tasks=True),
                "power_these": paired_power(diff, var_these, t, alpha, new_tasks=False),
                "trials_needed_these": _trials_needed(pop, k, t, diff, alpha, power),
            }
        )
    out = pd.DataFrame(rows)
    out["input_tokens"] = out["trials"] * per_trial["input_tokens"]
    out["output_tokens"] = out["trials"] * per_trial["output_tokens"]
    if price_in is not None and price_out is not None:
        out["cost_usd"] = (out["input_tokens"] * price_in + out["output_tokens"] * price_out) / 1e6
    else:
        out["cost_usd"] = np.nan
    out["wall_s"] = out["trials"] * per_trial["latency_s"] / concurrency
    out["new_tasks_needed"] = np.maximum(out["tasks"] - n.size, 0)
    if budget is not None:
        out["best"] = out["halfwidth_new"] == out["halfwidth_new"].min()
    out["population"] = "mixture" if pop.mixture is not None else "pilot tasks (shrunk)"
    return out


def _trials_needed(pop: Population, k: int, tasks: int, diff: float, alpha: float, power: float) -> float:
    if diff == 0:
        return np.nan
    m = k
    while m <= 1000:
        _, _, within = components(pop, k, m)
        if paired_power(diff, 2 * within, tasks, alpha, new_tasks=False) >= power:
            return float(m)
        m = m + max(1, m // 4)
    return np.nan


def _splits(budget: int, k: int, pilot_tasks: int) -> list[tuple[int, int]]:
    if budget < 2 * k:
        raise ValueError(f"a budget of {budget} trials cannot give 2 tasks {k} trials each; raise budget=")
    splits: dict[int, int] = {}
    for m in range(k, budget // 2 + 1):
        t = budget // m
        if t >= 2:
            splits.setdefault(t, m)
    return sorted(splits.items())[:: max(1, len(splits) // 40)]


def _per_trial(pilot: pd.DataFrame) -> dict[str, float]:
    out = {}
    for col in ("input_tokens", "output_tokens", "latency_s"):
        values = (
            pd.to_numeric(pilot[col], errors="coerce") if col in pilot.columns else pd.Series(dtype=float)
        )
        out[col] = float(values.mean()) if values.notna().any() else np.nan
    return out
