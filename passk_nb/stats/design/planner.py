"""Plan a run: how many tasks and trials answer the question, and what they cost.

:func:`plan` tabulates, for a grid of designs (tasks T × trials n) or the splits of a budget,
the predicted half-widths, detectable differences, power and cost from pilot records of one
configuration or two arms; :func:`plan_trials` gives the trials per task of the fixed design that
answers a :class:`~passk_nb.stats.design.question.Question` (the N of its ``final=N``). The
population model and how the predictions are made: ``docs/methods/planning.md``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from functools import cache

import numpy as np
import pandas as pd

from passk_nb.stats.checks import check_k
from passk_nb.stats.counts import as_counts, counts
from passk_nb.stats.design.population import (
    Population,
    TwoArms,
    components,
    fixed_floor,
    pilot_population,
    pilot_rho,
    reach,
    two_arms,
)
from passk_nb.stats.design.power import (
    ALPHA,
    N_SIM,
    POWER,
    POWER_SUITES,
    Draws,
    detectable,
    detectable_new,
    gate_halfwidth,
    halfwidths,
    paired_power,
    simulated_power,
)
from passk_nb.stats.design.question import Question, as_question
from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.intervals import design_effect, plugin_task_variance
from passk_nb.stats.paired import _arms, _default_by, paired_tasks
from passk_nb.stats.params import CI, CLUSTER, INFRA, MIN_TASKS, SEED, default_by, share_docs
from passk_nb.stats.result import described

#: Correlation of p^k between two arms across tasks when the pilot has one arm.
RHO = 0.5


def plan_trials(
    pilot: pd.DataFrame,
    question: Question | str,
    *,
    tasks: int | None = None,
    power: float = POWER,
    most: int = 64,
    by: str | Sequence[str] | None = None,
    infra: str = INFRA,
    n_sim: int = N_SIM,
    seed: int = SEED,
) -> int:
    """The trials per task of the fixed design that answers ``question`` on these tasks: the N of
    ``final=N``, or of a fixed run. From pilot records of one configuration (of the two arms
    ``question`` compares, for a comparison), the fewest n among k, 2k, …, ``most``·k whose
    predicted *these tasks* half-width (``halfwidth_these`` of :func:`plan`, the same simulation)
    is at most: the precision (``precision=h``); :func:`gate_halfwidth` of the pilot's distance to
    the gate (``gate=m``: the interval clears it with ``power``); h/√2 for each arm (a comparison
    with ``precision=h``: two arms' widths add in quadrature). ``tasks``: T (default: the pilot's).

    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> passed = rng.random((20, 8)) < rng.beta(2, 1, 20)[:, None]
    >>> pilot = pd.DataFrame({"task": np.repeat(np.arange(20), 8), "passed": passed.ravel()})
    >>> pilot["outcome"] = np.where(pilot["passed"], "pass", "wrong_state")
    >>> plan_trials(pilot, "precision=0.05 k=2") > plan_trials(pilot, "precision=0.1 k=2")
    True
    """
    q = as_question(question)
    if q.kind == "compare":
        if q.precision is None:
            raise ValueError(
                "a fixed design for a comparison is sized for a precision: ask "
                f"'compare={q.on}:{q.a},{q.b} precision=0.1', or plan(..., diff=) for the power to detect one"
            )
        tables = list(_pilot_tables(pilot, q.on, q.a, q.b, by, infra))
        target = q.precision / np.sqrt(2)
    else:
        tables = [_pilot_tables(pilot, None, None, None, by, infra)[0]]
        if q.kind == "precision":
            assert q.precision is not None
            target = q.precision
        else:
            assert q.gate is not None
            n, c = tables[0]["n"].to_numpy(), tables[0]["c"].to_numpy()
            estimate = float(np.mean(pass_hat_k(n[n >= q.k], c[n >= q.k], q.k)))
            if estimate == q.gate:
                raise ValueError(f"the pilot's pass^{q.k} is the gate, {q.gate}: no fixed design decides it")
            target = gate_halfwidth(estimate - q.gate, power, q.ci)
    grid = [q.k * m for m in range(1, most + 1)]
    needed = []
    for table in tables:
        pop = pilot_population(table["n"].to_numpy(), table["c"].to_numpy())
        t = len(table) if tasks is None else tasks
        _, these = halfwidths(pop, q.k, [(t, m) for m in grid], ci=q.ci, n_sim=n_sim, seed=seed)
        reached = np.flatnonzero(these <= target)
        if not reached.size:
            raise ValueError(
                f"no fixed design of up to {grid[-1]} trials per task reaches ± {target:.3f} for {q}: "
                f"{_reachable(q, these, grid, power)}. Ask a looser question, add tasks (tasks=), or "
                "raise most="
            )
        needed.append(grid[int(reached[0])])
    return max(needed)


def _reachable(q: Question, these: np.ndarray, grid: list[int], power: float) -> str:
    """What the narrowest of the designs tried does answer, in the question's own terms: the
    precision it gives, or the smallest gap to the gate it resolves with ``power``."""
    best = int(np.nanargmin(these))
    half, n = float(these[best]), grid[best]
    if q.kind == "compare":
        return f"the narrowest, {n} trials per task, gives a comparison ± {half * np.sqrt(2):.3f}"
    if q.kind == "precision":
        return f"the narrowest, {n} trials per task, gives ± {half:.3f}"
    gap = half / gate_halfwidth(1.0, power, q.ci)  # the half-width is linear in the gap
    return (
        f"the narrowest, ± {half:.3f} at {n} trials per task, resolves a gate at least {gap:.3f} "
        f"from pass^{q.k} (with power {power:.0%})"
    )


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
    on: str | None = None,
    a: object = None,
    b: object = None,
    rho: float | None = None,
    budget: int | None = None,
    price_in: float | None = None,
    price_out: float | None = None,
    concurrency: int = 1,
    batch_latency_s: float | None = None,
    by: str | Sequence[str] | None = None,
    ci: float = CI,
    infra: str = INFRA,
    n_sim: int = N_SIM,
    power_suites: int = POWER_SUITES,
    seed: int = SEED,
    cluster: str | None = CLUSTER,
) -> pd.DataFrame:
    """How many tasks and trials answer the question, and what each plan costs.

    From pilot records of one configuration (or two arms of one, with ``on``, ``a``, ``b``),
    returns one row per plan (``tasks`` T, ``trials_per_task`` n) with:

    - ``halfwidth_new`` / ``halfwidth_these``: predicted mean ``ci`` half-widths of the suite's
      pass^k intervals :func:`summarize` gives, for "new tasks like these" and "these tasks,
      re-rolled" (NaN for new tasks where it declines: fewer than 5 tasks); each the mean over
      suites simulated from the pilot's population (:func:`halfwidths`), so never 0;
    - ``mdd_new`` / ``mdd_these``: the smallest paired difference in pass^k between two arms
      (prompts, models; arm b better) the plan detects with ``power`` at two-sided level
      ``alpha``, each the difference at which the matching power below reaches ``power``:
      ``mdd_new`` by secant steps on ``power_new``'s simulation (:func:`detectable_new`; NaN where
      no arm b like the pilot's reaches that power), ``mdd_these`` from the z formula
      (:func:`detectable`); and ``power_new`` / ``power_these`` to detect
      ``diff``. ``power_new`` is the share of simulated two-arm suites in which :func:`compare`'s
      own new-task decision at level ``alpha`` finds it (:func:`simulated_power`; NaN below 5
      tasks where compare declines; the suites come from the pilot's population for each arm,
      arm b's log-odds raised on every task until the populations differ by ``diff``,
      :func:`two_arms`; NaN with a warning when no such arm b exists). ``power_these`` is the
      fixed-task z test's formula (:func:`paired_power`), which simulation did not beat
      (``benchmarks/plan_validation.py``). For new tasks it matters how closely the arms' tasks
      move together: ``rho`` (their correlation of p^k across tasks) and ``rho_source`` say what
      was used: estimated from a pilot with two arms (:func:`pilot_rho`, from the spread of its
      per-task differences; each arm gets its own population), given, or the default 0.5
      because the pilot has one arm (its population then stands for both);
    - ``trials_needed_these``: the trials per task that detect ``diff`` with these T tasks
      (NaN when no n ≤ 1000 does);
    - ``trials``, ``input_tokens``, ``output_tokens`` (pilot means per trial × trials),
      ``cost_usd`` (prices per million tokens, NaN without them) and ``wall_s`` (mean pilot
      latency × trials / ``concurrency``; for a batch run, ``batch_latency_s``: the pilot's longest
      trial in turns × the seconds a batch takes, every trial's turn in each batch — pass the batch
      prices, half the usual, as ``price_in``/``price_out``);
    - with ``budget`` (total trials): the splits of it into T × n, ``best`` marking the
      narrowest ``halfwidth_new``.

    ``between`` and ``within`` are arm a's two variance components per task (:func:`components`).

    {df}
    {k}
    tasks: numbers of tasks to plan for (default: the pilot's T, 2T, 4T).
    trials: trials per task to plan for (default k, 2k, 4k, 8k, 16k).
    on, a, b: a two-arm pilot: the column and its values naming the arms (as :func:`compare`);
        half-widths are arm a's.
    rho: the arms' correlation of p^k across tasks (default: estimated from a two-arm pilot, else 0.5).
    {by}
    {ci}
    {infra}
    n_sim: tasks simulated per plan for the half-widths (default 16,000, e.g. 400 suites of 40).
    power_suites: two-arm suites simulated per plan for ``power_new`` (default 800: Monte-Carlo
        standard error ≤ 0.018; fewer, never under 200, where T × 800 passes 64,000 tasks).
    seed: the simulation's seed (default 0).
    {cluster} The plan then counts T tasks as T / deff independent ones for everything about new
        tasks (``halfwidth_new``, ``power_new``, ``mdd_new``), deff the pilot's design effect
        (:func:`~passk_nb.stats.intervals.design_effect`: of pass^k, and of the arms' paired
        difference for the comparison; column ``design_effect``): new tasks are assumed to come in
        families like the pilot's. The *these tasks* columns do not change.

    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> p = rng.beta(2, 1, 30)
    >>> passed = rng.random((30, 8)) < p[:, None]
    >>> pilot = pd.DataFrame({"task": np.repeat(np.arange(30), 8), "passed": passed.ravel()})
    >>> pilot["outcome"] = np.where(pilot["passed"], "pass", "wrong_state")
    >>> out = plan(pilot, k=2, tasks=[30, 60], trials=[4, 16])
    >>> out[["tasks", "trials_per_task", "trials"]].values.tolist()
    [[30, 4, 120], [30, 16, 480], [60, 4, 240], [60, 16, 960]]
    >>> bool(out["halfwidth_new"].is_monotonic_decreasing), out["rho_source"].iloc[0]
    (True, 'default: the pilot has one arm (give on=, a=, b= to estimate it)')
    """
    _check_plan(k, power, alpha, ci, rho, n_sim, power_suites)
    table_a, table_b = _pilot_tables(pilot, on, a, b, by, infra)
    n, c = table_a["n"].to_numpy(), table_a["c"].to_numpy()
    pop_a = pilot_population(n, c)
    pop_b = pop_a if on is None else pilot_population(table_b["n"].to_numpy(), table_b["c"].to_numpy())
    rho_used, rho_source, spread = _rho(rho, on, table_a, table_b, pop_a, pop_b, k)
    grid = _designs(budget, tasks, trials, k, n.size)
    half_new, half_these = halfwidths(pop_a, k, grid, ci=ci, n_sim=n_sim, seed=seed)
    deff_new, deff_diff = _design_effects(pilot, on, a, b, by, infra, k, cluster)
    if deff_new > 1:  # families: new-task widths of T / deff independent tasks
        half_new = halfwidths(pop_a, k, _effective(grid, deff_new), ci=ci, n_sim=n_sim, seed=seed)[0]
    grid_diff = _effective(grid, deff_diff)
    draws = Draws()  # the power at diff and mdd_new's steps share the tasks and arm a's successes
    joint, power_new = _power_new(
        pop_a, pop_b, k, grid_diff, diff, rho_used, alpha, power_suites, seed, draws
    )

    @cache
    def noise(m: int) -> tuple[float, float]:
        """Both arms' within-task variance and expected fixed-task variance at m trials."""
        within_ = sum(components(pop, k, m)[2] for pop in (pop_a, pop_b))
        return within_, sum(fixed_floor(pop, k, m) for pop in (pop_a, pop_b))

    known = None if joint is None else (diff, power_new)
    mdd_new = _mdd_new(
        pop_a, pop_b, k, grid_diff, rho_used, spread, noise, known, power, alpha, power_suites, seed, draws
    )
    rows = []
    for i, (t, m) in enumerate(grid):
        _, between, within = components(pop_a, k, m)
        var_these, floor = noise(m)
        rows.append(
            {
                "tasks": t,
                "trials_per_task": m,
                "trials": t * m,
                "between": between,
                "within": within,
                "halfwidth_new": half_new[i],
                "halfwidth_these": half_these[i],
                "mdd_new": mdd_new[i],
                "mdd_these": detectable(var_these, t, alpha, power, False, floor),
                "power_new": power_new[i],
                "power_these": paired_power(diff, var_these, t, alpha, False, floor),
                "trials_needed_these": _trials_needed(noise, k, t, diff, alpha, power),
            }
        )
    out = pd.DataFrame(rows)
    _add_costs(out, _per_trial(pilot), price_in, price_out, concurrency, batch_latency_s)
    out["new_tasks_needed"] = np.maximum(out["tasks"] - n.size, 0)
    if budget is not None:
        out["best"] = out["halfwidth_new"] == out["halfwidth_new"].min()
    out["population"] = "mixture" if pop_a.mixture is not None else "pilot tasks (shrunk)"
    out["rho"] = rho_used
    out["rho_source"] = rho_source
    if cluster is not None:
        out["design_effect"] = deff_new
    return described(out, "plan", by=(), k=k, ci=ci, infra=infra, cluster=cluster)


def _effective(grid: list[tuple[int, int]], deff: float) -> list[tuple[int, int]]:
    """The designs with T tasks in families counted as round(T / deff) independent tasks (at least 2)."""
    return grid if deff <= 1 else [(max(2, round(t / deff)), m) for t, m in grid]


def _design_effects(
    pilot: pd.DataFrame,
    on: str | None,
    a: object,
    b: object,
    by: str | Sequence[str] | None,
    infra: str,
    k: int,
    cluster: str | None,
) -> tuple[float, float]:
    """The pilot's design effects (:func:`~passk_nb.stats.intervals.design_effect`) of arm a's pass^k
    and of the paired difference (of pass^k itself for a one-arm pilot, whose arm b is arm a
    shifted); (1, 1) without ``cluster``."""
    if cluster is None:
        return 1.0, 1.0
    if on is None:
        counted = as_counts(pilot, by=default_by(pilot, by), infra=infra, cluster=cluster)
    else:
        arm_a, arm_b = _arms(pilot, on, a, b)
        counted = as_counts(arm_a, by=_default_by(by, on, arm_a, arm_b), infra=infra, cluster=cluster)
    n, c, unit = counted.table["n"].to_numpy(), counted.table["c"].to_numpy(), counted.units()
    assert unit is not None
    usable = n >= k
    n, c, unit = n[usable], c[usable], unit[usable]
    deff_a = design_effect(np.asarray(pass_hat_k(n, c, k)), plugin_task_variance(n, c, k), unit)
    if on is None:
        return deff_a, deff_a
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        tasks = paired_tasks(pilot, on=on, a=a, b=b, k=k, by=by, infra=infra, cluster=cluster)
    assert tasks.unit is not None
    j = 1  # pass^k
    deff_diff = design_effect(
        tasks.vb[:, j] - tasks.va[:, j], tasks.var_a[:, j] + tasks.var_b[:, j], tasks.unit
    )
    return deff_a, deff_diff


def _check_plan(
    k: int, power: float, alpha: float, ci: float, rho: float | None, n_sim: int, power_suites: int
) -> None:
    """Refuse :func:`plan`'s numeric arguments out of range, before any simulation."""
    check_k(k)
    for name, value in (("power", power), ("alpha", alpha), ("ci", ci)):
        if not 0 < value < 1:
            raise ValueError(f"{name} must be between 0 and 1; got {name}={value}")
    if rho is not None and not -1 <= rho <= 1:
        raise ValueError(f"rho is a correlation between -1 and 1; got rho={rho}")
    if isinstance(n_sim, bool) or not isinstance(n_sim, int | np.integer) or n_sim < 100:
        raise ValueError(f"n_sim must be a whole number of simulated tasks ≥ 100; got n_sim={n_sim!r}")
    if isinstance(power_suites, bool) or not isinstance(power_suites, int | np.integer) or power_suites < 50:
        raise ValueError(
            f"power_suites must be a whole number of simulated suites ≥ 50; got power_suites={power_suites!r}"
        )


def _designs(
    budget: int | None, tasks: Sequence[int] | None, trials: Sequence[int] | None, k: int, pilot_tasks: int
) -> list[tuple[int, int]]:
    """The (tasks, trials per task) designs :func:`plan` tabulates: the splits of ``budget``, or
    ``tasks`` × ``trials`` (default: the pilot's T, 2T, 4T × k, 2k, 4k, 8k, 16k)."""
    if budget is not None:
        grid = _splits(budget, k, pilot_tasks)
    else:
        tasks_ = list(tasks) if tasks is not None else [pilot_tasks, 2 * pilot_tasks, 4 * pilot_tasks]
        trials_ = list(trials) if trials is not None else [k * m for m in (1, 2, 4, 8, 16)]
        grid = [(t, m) for t in tasks_ for m in trials_]
    for t, m in grid:
        if t < 2 or m < k:
            raise ValueError(
                f"a plan needs at least 2 tasks and k={k} trials per task; got tasks={t}, trials={m}"
            )
    return grid


def _power_new(
    pop_a: Population,
    pop_b: Population,
    k: int,
    grid: list[tuple[int, int]],
    diff: float,
    rho: float,
    alpha: float,
    suites: int,
    seed: int,
    draws: Draws,
) -> tuple[TwoArms | None, np.ndarray]:
    """The joint population of two arms ``diff`` apart and :func:`simulated_power` of every design
    on it (None and NaN, with a warning, when no arm b like the pilot's is that far from arm a)."""
    joint = two_arms(pop_a, pop_b, k, diff, rho)
    if joint is None:
        bottom, top = reach(pop_a, pop_b, k)
        warnings.warn(
            f"no arm b like the pilot's differs from arm a by diff={diff} in pass^{k} (reachable: "
            f"{bottom:+.3f} to {top:+.3f}); power_new is NaN: ask for a diff in that range",
            UserWarning,
            stacklevel=3,
        )
        power_new = np.full(len(grid), np.nan)
    else:
        power_new = simulated_power(joint, k, grid, alpha=alpha, suites=suites, seed=seed, draws=draws)
    return joint, power_new


def _mdd_new(
    pop_a: Population,
    pop_b: Population,
    k: int,
    grid: list[tuple[int, int]],
    rho_used: float,
    spread: float,
    noise: Callable[[int], tuple[float, float]],
    known: tuple[float, np.ndarray] | None,
    power: float,
    alpha: float,
    power_suites: int,
    seed: int,
    draws: Draws,
) -> np.ndarray:
    """:func:`detectable_new` of every design, started from the paired-t formula (:func:`detectable`
    with the arms' ``spread`` and ``noise``), with a warning where no arm b reaches ``power``."""
    formula = np.array(
        [
            detectable(spread + noise(m)[0], t, alpha, power, True, noise(m)[1]) if t >= MIN_TASKS else np.nan
            for t, m in grid
        ]
    )
    mdd_new = detectable_new(
        pop_a,
        pop_b,
        k,
        grid,
        rho_used,
        formula,
        power=power,
        alpha=alpha,
        known=known,
        suites=power_suites,
        seed=seed,
        draws=draws,
    )
    declined = [f"{t}×{m}" for (t, m), x in zip(grid, mdd_new, strict=True) if t >= MIN_TASKS and np.isnan(x)]
    if declined:
        top = reach(pop_a, pop_b, k)[1]
        warnings.warn(
            f"mdd_new is NaN for {', '.join(declined)} (tasks×trials): no arm b like the pilot's reaches "
            f"power {power} there (the largest difference in pass^{k} it can have is {top:+.3f}); "
            "plan more tasks, or ask for less power",
            UserWarning,
            stacklevel=3,
        )
    return mdd_new


def _add_costs(
    out: pd.DataFrame,
    per_trial: dict[str, float],
    price_in: float | None,
    price_out: float | None,
    concurrency: int,
    batch_latency_s: float | None,
) -> None:
    """Add :func:`plan`'s token, cost and wall-clock columns to ``out`` (one row per design)."""
    out["input_tokens"] = out["trials"] * per_trial["input_tokens"]
    out["output_tokens"] = out["trials"] * per_trial["output_tokens"]
    if price_in is not None and price_out is not None:
        out["cost_usd"] = (out["input_tokens"] * price_in + out["output_tokens"] * price_out) / 1e6
    else:
        out["cost_usd"] = np.nan
    if batch_latency_s is None:
        out["wall_s"] = out["trials"] * per_trial["latency_s"] / concurrency
    else:
        if not np.isfinite(batch_latency_s) or batch_latency_s <= 0:
            raise ValueError(f"batch_latency_s is the seconds one batch takes (> 0); got {batch_latency_s}")
        out["wall_s"] = per_trial["rounds"] * float(batch_latency_s)


def _pilot_tables(
    pilot: pd.DataFrame,
    on: str | None,
    a: object,
    b: object,
    by: str | Sequence[str] | None,
    infra: str,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The counts of arm a and arm b of a pilot (as :func:`compare` splits them with ``on``); the
    same table twice for a one-arm pilot (``on=None``)."""
    if on is None:
        table = _one_configuration(pilot, default_by(pilot, by), infra)
        return table, table
    if a is None or b is None:
        raise ValueError(f"a two-arm pilot needs both arms named: on={on!r}, a=..., b=... (as compare)")
    arm_a, arm_b = _arms(pilot, on, a, b)
    by_ = _default_by(by, on, arm_a, arm_b)
    table_a, table_b = (_one_configuration(arm, by_, infra) for arm in (arm_a, arm_b))
    return table_a, table_b


def _one_configuration(pilot: pd.DataFrame, by: tuple[str, ...], infra: str) -> pd.DataFrame:
    """The pilot's counts (tasks with n > 0), refusing a pilot of several configurations."""
    table = counts(pilot, by=by, infra=infra)
    table = table[table["n"] > 0]
    if by and len(table[list(by)].drop_duplicates()) > 1:
        groups = table[list(by)].drop_duplicates().to_dict("records")
        raise ValueError(
            f"the pilot holds {len(groups)} configurations ({groups[:3]}...); plan one at a time: "
            "filter the frame, or pass by=() to pool them on purpose"
        )
    return table


def _rho(
    rho: float | None,
    on: str | None,
    table_a: pd.DataFrame,
    table_b: pd.DataFrame,
    pop_a: Population,
    pop_b: Population,
    k: int,
) -> tuple[float, str, float]:
    """The correlation used, where it came from, and the variance across tasks of the arms' true
    per-task difference in pass^k that goes with it."""
    between_a, between_b = components(pop_a, k, k)[1], components(pop_b, k, k)[1]  # Var(p^k): any n

    def spread(r: float) -> float:
        return between_a + between_b - 2 * r * np.sqrt(between_a * between_b)

    if rho is not None:
        return float(rho), "given", spread(rho)
    if on is None:
        return RHO, "default: the pilot has one arm (give on=, a=, b= to estimate it)", spread(RHO)
    paired = pd.merge(table_a, table_b, on="task", suffixes=("_a", "_b"))
    paired = paired[(paired["n_a"] >= k) & (paired["n_b"] >= k)]
    n_a, c_a, n_b, c_b = (paired[col].to_numpy() for col in ("n_a", "c_a", "n_b", "c_b"))
    values_a, values_b = (np.asarray(pass_hat_k(n, c, k), dtype=float) for n, c in ((n_a, c_a), (n_b, c_b)))
    noise = {n: components(pop_a, k, n)[2] for n in set(n_a)}
    noise_b = {n: components(pop_b, k, n)[2] for n in set(n_b)}
    within = np.array([noise[x] + noise_b[y] for x, y in zip(n_a, n_b, strict=True)])
    estimate = pilot_rho(values_a, values_b, within, between_a, between_b)
    if estimate is None:
        return (
            RHO,
            (
                "default: the pilot's arms cannot estimate it (fewer than 3 paired tasks with k trials, "
                "or no spread of p^k across tasks)"
            ),
            spread(RHO),
        )
    return estimate[1], "pilot", estimate[0]


def _trials_needed(
    noise: Callable[[int], tuple[float, float]], k: int, tasks: int, diff: float, alpha: float, power: float
) -> float:
    """Fewest trials per task whose fixed-task test detects ``diff`` with ``power``; ``noise(n)``
    gives both arms' (within, floor) at n trials."""
    if diff == 0:
        return np.nan
    m = k
    while m <= 1000:
        within, floor = noise(m)
        if paired_power(diff, within, tasks, alpha, False, floor) >= power:
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
    turns = pd.to_numeric(pilot["n_turns"], errors="coerce") if "n_turns" in pilot.columns else None
    # a batch run: one batch round per turn of its longest trial
    out["rounds"] = float(turns.max()) if turns is not None and turns.notna().any() else np.nan
    return out
