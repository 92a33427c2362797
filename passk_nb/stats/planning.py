"""Plan a run: how many tasks and trials answer the question, and what they cost.

The suite's pass^k estimate (the mean over T tasks of the unbiased per-task value X_t at n
trials) has two variance components:

- between tasks: Var(p^k) over the population of tasks (shrinks only with more tasks);
- within a task: E[Var(X_t | p_t)], the binomial noise of n trials (shrinks with more trials).

Both are computed exactly from a population of tasks: the mixture
:func:`passk_nb.stats.forecast.fit_mixture` fits to the pilot (always + never + Beta), or, when the
pilot cannot identify it, the pilot's own tasks at the shrunk p̃ = (c + ½) / (n + 1). The predicted
half-widths are not formulas: they are the mean half-widths of the intervals :func:`summarize`
ships, run on suites simulated from that population, so they follow whatever interval it gives.
The predicted power for new tasks is likewise the rejection rate of :func:`compare`'s decision on
two-arm suites simulated from the arms' populations joined by a Gaussian copula (:class:`TwoArms`),
and the new-task detectable difference is where that rate reaches the power asked for.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, cached_property

import numpy as np
import pandas as pd
from scipy import optimize, special
from scipy import stats as sps

from passk_nb.stats.checks import check_k
from passk_nb.stats.counts import counts
from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.forecast import Mixture, fit_mixture, unidentified
from passk_nb.stats.intervals import fixed_task_variance
from passk_nb.stats.paired import PairedTasks, _arms, _default_by, differs, paired_frame
from passk_nb.stats.params import (
    CI,
    INFRA,
    MIN_TASKS,
    N_BOOT,
    PAIRED_METHOD,
    SEED,
    default_by,
    share_docs,
)
from passk_nb.stats.sequential import Question, as_question
from passk_nb.stats.summary import summarize

#: Default power and two-sided test level of the detectable difference.
POWER = 0.8
ALPHA = 0.05
#: Correlation of p^k between two arms across tasks when the pilot has one arm.
RHO = 0.5
#: Tasks simulated per plan row for the predicted half-widths (400 suites of 40 tasks).
N_SIM = 16_000
#: Two-arm suites simulated per plan row for the predicted new-task power (Monte-Carlo standard
#: error at most 0.5/√800 = 0.018), fewer for large T so that a row simulates at most POWER_TASKS
#: tasks (never fewer than 200 suites: standard error ≤ 0.035).
POWER_SUITES = 800
POWER_TASKS = 64_000
#: Points of a population's Beta quantile function tabulated for :meth:`Population.quantile`.
_V = np.linspace(0.0, 1.0, 4097)
_MIDPOINTS = (_V[:-1] + _V[1:]) / 2
#: The largest log-odds shift of arm b tried (either way): p moves to within e^-30 of 0 or 1.
SHIFT = 30.0
#: Stratified standard-normal nodes on which the copula's correlation is computed.
_NODES = sps.norm.ppf((np.arange(160) + 0.5) / 160)


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

    def sample(self, size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Success probabilities of ``size`` tasks drawn from the population."""
        if self.mixture is not None:
            return self.mixture.sample(size, rng)
        assert self.atoms is not None
        return rng.choice(self.atoms, size)

    @cached_property
    def _beta_quantiles(self) -> np.ndarray:
        assert self.mixture is not None
        return np.asarray(special.betaincinv(self.mixture.alpha, self.mixture.beta, _V))

    def quantile(self, u: np.ndarray) -> np.ndarray:
        """The success probability at rank u in (0, 1) of the population (its inverse CDF).

        >>> Population(atoms=np.array([0.9, 0.2, 0.5])).quantile(np.array([0.1, 0.5, 0.99])).tolist()
        [0.2, 0.5, 0.9]
        """
        u = np.asarray(u, dtype=float)
        if self.mixture is not None:
            m = self.mixture
            flaky = (
                np.interp((u - m.share_never) / m.share_flaky, _V, self._beta_quantiles)
                if m.share_flaky > 0
                else np.zeros_like(u)
            )
            return np.where(u < m.share_never, 0.0, np.where(u >= 1 - m.share_always, 1.0, flaky))
        assert self.atoms is not None
        atoms = np.sort(self.atoms)
        return atoms[np.minimum((u * atoms.size).astype(np.int64), atoms.size - 1)]

    def shifted_moment(self, k: int, shift: float) -> float:
        """E[p'^k] where each task's log-odds of success is raised by ``shift`` (:func:`shifted`)."""
        if self.mixture is not None:
            m = self.mixture
            flaky = np.interp(_MIDPOINTS, _V, self._beta_quantiles) if m.share_flaky > 0 else np.zeros(1)
            return float(m.share_always + m.share_flaky * np.mean(shifted(flaky, shift) ** k))
        assert self.atoms is not None
        return float(np.mean(shifted(self.atoms, shift) ** k))

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


def halfwidths(
    pop: Population,
    k: int,
    designs: Sequence[tuple[int, int]],
    *,
    ci: float = CI,
    n_sim: int = N_SIM,
    seed: int = SEED,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean half-widths of :func:`summarize`'s pass^k intervals, for new tasks and for these tasks,
    over suites drawn from ``pop`` for each design (tasks T, trials n): the intervals users get,
    so the prediction follows them when they change. NaN for new tasks where summarize declines.

    Each design gets about ``n_sim`` simulated tasks (n_sim / T suites, 100 to 1,000): the spread
    of a half-width over suites shrinks like 1/√T, so the Monte-Carlo error is alike for every
    T. All designs run through one :func:`summarize` call; each design's draw depends only on
    ``seed``, T and n.

    >>> pop = Population(atoms=np.array([0.6, 0.9, 1.0]))
    >>> new, these = halfwidths(pop, 2, [(20, 8)], n_sim=4000)
    >>> bool(0 < these[0] < new[0] < 0.5)
    True
    """
    parts = []
    for i, (tasks, trials) in enumerate(designs):
        rng = np.random.default_rng([seed, tasks, trials])
        suites = min(max(100, -(-n_sim // tasks)), 1000)
        c = rng.binomial(trials, pop.sample((suites, tasks), rng)).ravel()
        parts.append((np.full(c.size, i), np.repeat(np.arange(suites), tasks), np.full(c.size, trials), c))
    design, sim, n, c = (np.concatenate(column) for column in zip(*parts, strict=True))
    table = pd.DataFrame({"design": design, "sim": sim, "task": np.arange(design.size), "n": n, "c": c})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a declined interval is the prediction: NaN
        out = summarize(table, k=k, by=("design", "sim"), ci=ci)
    widths = pd.DataFrame(
        {
            "design": out["design"],
            "new": out["pass^k_hi"] - out["pass^k_lo"],
            "these": out["pass^k_fixed_hi"] - out["pass^k_fixed_lo"],
        }
    )
    mean = widths.groupby("design").mean() / 2  # NaN only where every suite's interval was declined
    return mean["new"].to_numpy(), mean["these"].to_numpy()


def pilot_rho(
    values_a: np.ndarray, values_b: np.ndarray, within: np.ndarray, between_a: float, between_b: float
) -> tuple[float, float] | None:
    """From the paired per-task estimates of a two-arm pilot: the variance across tasks of the
    true per-task difference, and the correlation of p^k between arms it implies. The spread of
    the observed differences less the trials' own noise (``within``, per task: both arms'
    E[Var(X | p)] at the pilot's n) estimates the first without a fitted joint model; the sample
    correlation would be pulled toward 0 by trial noise. ``between_a``/``between_b``: each arm's
    Var(p^k). None when it cannot be estimated.

    >>> d = pilot_rho(np.array([1.0, 0.5, 0.0, 1.0]), np.array([1.0, 0.75, 0.25, 1.0]),
    ...               np.full(4, 0.01), 0.2, 0.12)
    >>> [round(x, 3) for x in d]
    [0.011, 0.998]
    """
    if values_a.size < 3 or between_a <= 0 or between_b <= 0:
        return None
    spread = float(np.var(values_b - values_a, ddof=1) - np.mean(within))
    rho = (between_a + between_b - spread) / (2 * np.sqrt(between_a * between_b))
    low = (np.sqrt(between_a) - np.sqrt(between_b)) ** 2  # rho = 1: the least a difference can vary
    return max(spread, low), float(np.clip(rho, -1.0, 1.0))


def paired_power(
    diff: float,
    var_diff: float,
    tasks: int,
    alpha: float = ALPHA,
    new_tasks: bool = True,
    floor: float = 0.0,
) -> float:
    """Power of the two-sided paired test of a difference ``diff`` in suite pass^k.

    ``var_diff`` is the variance of one task's difference (between + both arms' within);
    new tasks: paired t-test over tasks (noncentral t); these tasks: z-test. ``floor``: the
    per-task variance the shipped test divides by at least (:func:`compare` floors the t test's
    spread at both arms' fixed-task variance, and its these-tasks test uses that variance,
    :func:`fixed_floor`); where it exceeds ``var_diff`` the test rejects beyond crit·√(floor/T)
    while the mean difference varies by √(var_diff/T).

    >>> round(paired_power(0.0, 0.04, 30), 3)  # no difference: the test's level
    0.05
    """
    crit = sps.t.ppf(1 - alpha / 2, tasks - 1) if new_tasks else sps.norm.ppf(1 - alpha / 2)
    sd = np.sqrt(var_diff / tasks)
    if new_tasks and floor <= var_diff and sd > 0:
        nc = diff / sd
        return float(sps.nct.sf(crit, tasks - 1, nc) + sps.nct.cdf(-crit, tasks - 1, nc))
    threshold = crit * np.sqrt(max(var_diff, floor) / tasks)
    if sd == 0:
        return (1.0 if diff != 0 else alpha) if threshold == 0 else float(abs(diff) > threshold)
    return float(sps.norm.sf((threshold - diff) / sd) + sps.norm.cdf((-threshold - diff) / sd))


def gate_halfwidth(gap: float, power: float = POWER, ci: float = CI) -> float:
    """The widest *these tasks* half-width with which a fixed design's ``ci`` interval clears a
    gate ``gap`` away from pass^k with probability ``power``: the estimate may land z_β standard
    errors toward the gate and its interval, z standard errors wide, still clear it, so
    (z + z_β)·se ≤ gap and the half-width z·se ≤ gap·z/(z + z_β) (the z formula of ``mdd_these``).
    Size a gate's fixed design (or a run's ``final=N``) by the first ``plan()`` row whose
    ``halfwidth_these`` is at most this.

    >>> round(gate_halfwidth(0.1), 4)  # a gate 0.1 from pass^k, 80 % power, 95 %
    0.07
    """
    if not 0 < power < 1 or not 0 < ci < 1:
        raise ValueError(f"power and ci are between 0 and 1; got power={power}, ci={ci}")
    z = float(sps.norm.ppf(0.5 + ci / 2))
    return abs(gap) * z / (z + float(sps.norm.ppf(power)))


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
                "ask a looser question, add tasks (tasks=), or raise most="
            )
        needed.append(grid[int(reached[0])])
    return max(needed)


def detectable(
    var_diff: float,
    tasks: int,
    alpha: float = ALPHA,
    power: float = POWER,
    new_tasks: bool = True,
    floor: float = 0.0,
) -> float:
    """Smallest difference the paired test detects with ``power`` (t quantiles for new tasks;
    ``floor`` as in :func:`paired_power`)."""
    if new_tasks and floor <= var_diff:
        factor = sps.t.ppf(1 - alpha / 2, tasks - 1) + sps.t.ppf(power, tasks - 1)
        return float(factor * np.sqrt(var_diff / tasks))
    crit = sps.t.ppf(1 - alpha / 2, tasks - 1) if new_tasks else sps.norm.ppf(1 - alpha / 2)
    return float(
        crit * np.sqrt(max(var_diff, floor) / tasks) + sps.norm.ppf(power) * np.sqrt(var_diff / tasks)
    )


def fixed_floor(pop: Population, k: int, n: int) -> float:
    """E[fixed-task variance of a task's pass^k] at n trials over the population: the variance
    :func:`compare`'s fixed-task standard error and its t floor use
    (:func:`~passk_nb.stats.intervals.fixed_task_variance`), in expectation.

    >>> pop = Population(atoms=np.array([1.0]))
    >>> fixed_floor(pop, 2, 4) > 0  # the variance of the worst p a task at 4 of 4 could have
    True
    """
    c = np.arange(n + 1)
    return float(np.sum(pop.pmf(n) * fixed_task_variance(np.full(n + 1, n), c, k)))


def pilot_population(n: np.ndarray, c: np.ndarray) -> Population:
    """The mixture fitted to the pilot, or its tasks at p̃ = (c + ½)/(n + 1) when unidentified."""
    if unidentified(n, c) is None:
        return Population(mixture=fit_mixture(n, c))
    return Population(atoms=(c + 0.5) / (n + 1))


def shifted(p: np.ndarray, shift: float | np.ndarray) -> np.ndarray:
    """p with its log-odds raised by ``shift``: p / (p + (1 − p)·e^−shift); 0 and 1 stay put.

    >>> shifted(np.array([0.0, 0.5, 1.0]), np.log(3)).tolist()
    [0.0, 0.75, 1.0]
    """
    return p / (p + (1 - p) * np.exp(-shift))


@dataclass(frozen=True)
class TwoArms:
    """Two arms' tasks: a task's latent ranks (z_a, z_b) are standard normal with correlation
    ``r`` (a Gaussian copula), p_a = Q_a(Φ(z_a)) and p_b = Q_b(Φ(z_b)) with its log-odds raised by
    ``shift`` (:func:`shifted`), Q the populations' quantiles. Built by :func:`two_arms`."""

    a: Population
    b: Population
    r: float
    shift: float

    def sample(self, z_a: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(p_a, p_b) of tasks from their standard normals (z_a and the independent part of z_b),
        arm b *not yet shifted* (the caller shifts it)."""
        z_b = self.r * z_a + np.sqrt(1 - self.r**2) * noise
        return self.a.quantile(sps.norm.cdf(z_a)), self.b.quantile(sps.norm.cdf(z_b))


def two_arms(pop_a: Population, pop_b: Population, k: int, diff: float, rho: float) -> TwoArms | None:
    """The joint population of :class:`TwoArms` whose suite pass^k differ by ``diff`` (b − a) and
    whose p^k correlate by ``rho`` across tasks (the nearest the copula reaches when it cannot); None
    when no shift of arm b's log-odds gives ``diff``.

    The shift is on the log-odds of every task alike (a Rasch-like "arm b is this much better"),
    so tasks at p = 0 or 1 stay there and p stays in [0, 1] whatever ``diff``.

    >>> pop = Population(mixture=Mixture(0.2, 0.1, 2.0, 1.0))
    >>> joint = two_arms(pop, pop, 2, 0.1, 0.8)
    >>> round(pop.shifted_moment(2, joint.shift) - pop.moment(2), 6), 0.8 < joint.r < 1
    (0.1, True)
    """
    target = pop_a.moment(k) + diff

    def gap(shift: float) -> float:
        return pop_b.shifted_moment(k, shift) - target

    low, high = gap(-SHIFT), gap(SHIFT)
    if low > 1e-9 or high < -1e-9:
        return None
    if min(abs(low), abs(high), abs(gap(0.0))) < 1e-9:  # at the edge of reach, or no shift needed
        shift = float(np.array([-SHIFT, SHIFT, 0.0])[np.argmin(np.abs([low, high, gap(0.0)]))])
    else:
        shift = float(optimize.brentq(gap, -SHIFT, SHIFT, xtol=1e-10))
    r = _copula_r(pop_a, pop_b, k, shift, rho)
    return TwoArms(pop_a, pop_b, r, shift)


def reach(pop_a: Population, pop_b: Population, k: int) -> tuple[float, float]:
    """The smallest and largest difference in pass^k (b − a) a log-odds shift of arm b can give.

    >>> pop = Population(atoms=np.array([0.0, 0.5, 1.0]))
    >>> [round(x, 3) for x in reach(pop, pop, 1)]  # the flaky third can go to 0 or to 1
    [-0.167, 0.167]
    """
    base = pop_a.moment(k)
    return pop_b.shifted_moment(k, -SHIFT) - base, pop_b.shifted_moment(k, SHIFT) - base


def _copula_r(pop_a: Population, pop_b: Population, k: int, shift: float, rho: float) -> float:
    """The latent correlation whose p^k correlate by ``rho`` (computed on stratified normal nodes;
    the correlation rises with r, so it is read off a grid of r, coarse then fine within the
    bracket; clipped to what r in [−1, 1] gives)."""
    z_a, w = _NODES[:, None], _NODES[None, :]
    q_a = np.broadcast_to(pop_a.quantile(special.ndtr(z_a)) ** k, (z_a.size, w.size)).ravel()

    def corr(grid: np.ndarray) -> np.ndarray:
        out = np.empty(grid.size)
        for i, r in enumerate(grid):
            q_b = shifted(pop_b.quantile(special.ndtr(r * z_a + np.sqrt(max(1 - r**2, 0.0)) * w)), shift) ** k
            with np.errstate(invalid="ignore", divide="ignore"):
                out[i] = np.corrcoef(q_a, q_b.ravel())[0, 1]
        return out

    coarse = np.linspace(-1.0, 1.0, 11)
    values = corr(coarse)
    if not np.isfinite(values).all():  # an arm without spread: any r gives the same suites
        return 0.0
    values = np.maximum.accumulate(values)  # monotone in r; remove the nodes' jitter
    if values[-1] <= values[0]:
        return 0.0
    if rho <= values[0] or rho >= values[-1]:
        return float(coarse[0] if rho <= values[0] else coarse[-1])
    i = int(np.searchsorted(values, rho, side="right")) - 1
    fine = np.linspace(coarse[i], coarse[i + 1], 9)
    inner = np.maximum.accumulate(np.r_[values[i], corr(fine[1:-1]), values[i + 1]])
    inner = np.clip(inner, values[i], values[i + 1])
    return float(np.interp(rho, inner, fine)) if inner[-1] > inner[0] else float(fine[0])


def simulated_power(
    joint: TwoArms | Sequence[TwoArms],
    k: int,
    designs: Sequence[tuple[int, int]],
    *,
    alpha: float = ALPHA,
    suites: int = POWER_SUITES,
    tasks_cap: int = POWER_TASKS,
    seed: int = SEED,
) -> np.ndarray:
    """The power of :func:`compare`'s new-task decision at two-sided level ``alpha``, for each
    design (tasks T, trials n): the share of two-arm suites drawn from ``joint`` in which compare's
    interval excludes 0. The suites go through compare's own paired machinery
    (:meth:`PairedTasks.from_counts`, :func:`paired_frame`, :func:`differs`), so the prediction is
    the test users get. NaN below :data:`MIN_TASKS` tasks, where compare declines.

    ``joint``: one joint population for every design, or one per design (:func:`detectable_new`
    asks each design at its own difference). ``suites`` per design, fewer where T·suites would pass
    ``tasks_cap`` (never fewer than 200). The tasks' latent normals are drawn once per T (from
    ``seed`` and T), their trials once per design, whatever the joint: common random numbers, so
    the power at two differences differs by the difference, not by the draw.

    >>> pop = Population(mixture=Mixture(0.2, 0.1, 2.0, 1.0))
    >>> level = simulated_power(two_arms(pop, pop, 2, 0.0, 0.8), 2, [(40, 8)])
    >>> bool(level[0] < 0.1)  # no difference: about the test's level
    True
    """
    joints = [joint] * len(designs) if isinstance(joint, TwoArms) else list(joint)
    if len(joints) != len(designs):
        raise ValueError(f"one joint population per design: {len(joints)} for {len(designs)} designs")
    normals: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    parts: list[tuple[np.ndarray, ...]] = []
    sizes = []  # suites of each design
    for (tasks, trials), arms in zip(designs, joints, strict=True):
        if tasks not in normals:
            rng = np.random.default_rng([seed, 2, tasks])
            size = (min(suites, max(200, tasks_cap // tasks)), tasks)
            normals[tasks] = (rng.standard_normal(size), rng.standard_normal(size))
        p_a, p_b = arms.sample(*normals[tasks])
        rng = np.random.default_rng([seed, 2, tasks, trials])
        c_a, c_b = rng.binomial(trials, p_a), rng.binomial(trials, shifted(p_b, arms.shift))
        parts.append((np.full(c_a.size, trials), c_a.ravel(), c_b.ravel()))
        sizes.append(len(p_a))
    n, c_a, c_b = (np.concatenate(column) for column in zip(*parts, strict=True))
    per_suite = np.repeat([tasks for tasks, _ in designs], sizes)
    gid = np.repeat(np.arange(sum(sizes)), per_suite)  # sorted: designs in order, suites within
    groups = pd.DataFrame({"group": np.arange(sum(sizes))})
    paired = PairedTasks.from_counts(("group",), k, gid, groups, n, c_a, n, c_b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a declined interval decides nothing
        frame = paired_frame(
            paired, ci=1 - alpha, n_boot=N_BOOT, seed=seed, method=PAIRED_METHOD, min_tasks=MIN_TASKS
        )
    new, _ = differs(frame[frame["metric"] == "pass^k"].sort_values("group"))
    design = np.repeat(np.arange(len(designs)), sizes)
    power_new = np.bincount(design, new, len(designs)) / np.asarray(sizes)
    small = np.array([tasks < MIN_TASKS for tasks, _ in designs])
    return np.where(small, np.nan, power_new)


def detectable_new(
    pop_a: Population,
    pop_b: Population,
    k: int,
    designs: Sequence[tuple[int, int]],
    rho: float,
    start: np.ndarray,
    *,
    power: float = POWER,
    alpha: float = ALPHA,
    known: tuple[float, np.ndarray] | None = None,
    suites: int = POWER_SUITES,
    seed: int = SEED,
    steps: int = 1,
) -> np.ndarray:
    """The difference (arm b better) at which :func:`simulated_power` reaches ``power``, per design:
    the new-task mdd that, fed back as ``diff``, gives that power (up to its Monte-Carlo error).

    Secant steps on the probit of the simulated power, from ``start`` (the paired-t formula,
    :func:`detectable`) and ``known`` (a difference and the powers already simulated at it), each
    step one :func:`simulated_power` of every design at its own difference; the last step's
    estimate is returned (the power curve under a log-odds shift is steeper than the normal curve
    the formula assumes, so the formula alone misses the power). NaN where T <
    :data:`MIN_TASKS` or no shift of arm b reaches the power.

    >>> pop = Population(mixture=Mixture(0.2, 0.1, 2.0, 1.0))
    >>> d = detectable_new(pop, pop, 2, [(40, 8)], 0.8, np.array([0.1]))
    >>> bool(0.02 < d[0] < 0.2)
    True
    """
    target = sps.norm.ppf(power)
    top = reach(pop_a, pop_b, k)[1]
    out = np.full(len(designs), np.nan)
    asked = [i for i, (tasks, _) in enumerate(designs) if tasks >= MIN_TASKS]
    if not asked or top <= 0:
        return out
    # points (d, probit of power) per design; d = 0 gives one side of the level
    points: list[list[tuple[float, float]]] = [[(0.0, float(sps.norm.ppf(alpha / 2)))] for _ in asked]
    if known is not None and 0 < known[0] < top:
        for row, value in zip(points, known[1][asked], strict=True):
            if np.isfinite(value) and 0.01 < value < 0.995:
                row.append((known[0], float(sps.norm.ppf(value))))
    d = np.where(np.isfinite(start[asked]) & (start[asked] > 0), start[asked], top / 2)
    below_top = np.full(len(asked), True)  # False: even the largest difference misses the power
    chosen = [designs[i] for i in asked]
    for step in range(steps + 1):
        d = np.clip(d, 1e-4, 0.999 * top)
        joints = [_joint_at(pop_a, pop_b, k, float(x), rho) for x in d]
        values = simulated_power(joints, k, chosen, alpha=alpha, suites=suites, seed=seed)
        for row, x, value in zip(points, d, values, strict=True):
            row.append((float(x), float(sps.norm.ppf(np.clip(value, 1e-3, 1 - 1e-3)))))
        below_top &= ~((d >= 0.99 * top) & (values < power))
        if step < steps:
            d = np.array([_secant(row, target) for row in points])
    d = np.array([_secant(row, target) for row in points])
    out[asked] = np.where(below_top & (d > 0) & (d < top), d, np.nan)
    return out


def _joint_at(pop_a: Population, pop_b: Population, k: int, diff: float, rho: float) -> TwoArms:
    joint = two_arms(pop_a, pop_b, k, diff, rho)
    assert joint is not None  # diff is kept inside the reach of a shift
    return joint


def _secant(points: list[tuple[float, float]], target: float) -> float:
    """Where the probit-linear curve through the two points nearest ``target`` (in probit) meets
    it; the points are (difference, probit of power), the first at difference 0. Where those two
    give no rising line (one difference twice, or noise beyond the curve's shape), the line
    through the nearest point and the first."""
    (d1, y1), (d2, y2) = sorted(points, key=lambda point: abs(point[1] - target))[:2]
    if d1 != d2 and y1 != y2:
        if (y2 - y1) / (d2 - d1) > 0:
            return d1 + (target - y1) * (d2 - d1) / (y2 - y1)
    elif d1 == 0:
        return d2
    zero = points[0][1]
    return d1 * (target - zero) / max(y1 - zero, 1e-3)


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

    ``between`` and ``within`` are arm a's two variance components per task (see the module).

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
    table_a, table_b = _pilot_tables(pilot, on, a, b, by, infra)
    n, c = table_a["n"].to_numpy(), table_a["c"].to_numpy()
    pop_a = pilot_population(n, c)
    pop_b = pop_a if on is None else pilot_population(table_b["n"].to_numpy(), table_b["c"].to_numpy())
    rho_used, rho_source, spread = _rho(rho, on, table_a, table_b, pop_a, pop_b, k)
    per_trial = _per_trial(pilot)
    if budget is not None:
        grid = _splits(budget, k, n.size)
    else:
        tasks_ = list(tasks) if tasks is not None else [n.size, 2 * n.size, 4 * n.size]
        trials_ = list(trials) if trials is not None else [k * m for m in (1, 2, 4, 8, 16)]
        grid = [(t, m) for t in tasks_ for m in trials_]
    for t, m in grid:
        if t < 2 or m < k:
            raise ValueError(
                f"a plan needs at least 2 tasks and k={k} trials per task; got tasks={t}, trials={m}"
            )
    half_new, half_these = halfwidths(pop_a, k, grid, ci=ci, n_sim=n_sim, seed=seed)
    joint = two_arms(pop_a, pop_b, k, diff, rho_used)
    if joint is None:
        bottom, top = reach(pop_a, pop_b, k)
        warnings.warn(
            f"no arm b like the pilot's differs from arm a by diff={diff} in pass^{k} (reachable: "
            f"{bottom:+.3f} to {top:+.3f}); power_new is NaN: ask for a diff in that range",
            UserWarning,
            stacklevel=2,
        )
        power_new = np.full(len(grid), np.nan)
    else:
        power_new = simulated_power(joint, k, grid, alpha=alpha, suites=power_suites, seed=seed)

    @cache
    def noise(m: int) -> tuple[float, float]:
        """Both arms' within-task variance and expected fixed-task variance at m trials."""
        within_ = sum(components(pop, k, m)[2] for pop in (pop_a, pop_b))
        return within_, sum(fixed_floor(pop, k, m) for pop in (pop_a, pop_b))

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
        known=None if joint is None else (diff, power_new),
        suites=power_suites,
        seed=seed,
    )
    declined = [f"{t}×{m}" for (t, m), x in zip(grid, mdd_new, strict=True) if t >= MIN_TASKS and np.isnan(x)]
    if declined:
        top = reach(pop_a, pop_b, k)[1]
        warnings.warn(
            f"mdd_new is NaN for {', '.join(declined)} (tasks×trials): no arm b like the pilot's reaches "
            f"power {power} there (the largest difference in pass^{k} it can have is {top:+.3f}); "
            "plan more tasks, or ask for less power",
            UserWarning,
            stacklevel=2,
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
    out["new_tasks_needed"] = np.maximum(out["tasks"] - n.size, 0)
    if budget is not None:
        out["best"] = out["halfwidth_new"] == out["halfwidth_new"].min()
    out["population"] = "mixture" if pop_a.mixture is not None else "pilot tasks (shrunk)"
    out["rho"] = rho_used
    out["rho_source"] = rho_source
    return out


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
