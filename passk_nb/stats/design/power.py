"""Precision and power of a fixed design (T tasks × n trials), predicted by simulating what ships.

:func:`halfwidths` are the mean half-widths of :func:`~passk_nb.stats.summary.summarize`'s
intervals on suites simulated from a :class:`~passk_nb.stats.design.population.Population`;
:func:`simulated_power` is the rejection rate of :func:`~passk_nb.stats.paired.compare`'s
decision on simulated two-arm suites and :func:`detectable_new` the difference where it reaches
the power asked for; :func:`paired_power`, :func:`detectable` and :func:`gate_halfwidth` are the
z and t formulas. Why simulation rather than formulas: ``docs/methods/planning.md``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from passk_nb.stats.counts import Counts
from passk_nb.stats.design.population import Population, TwoArms, reach, shifted, two_arms
from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.intervals import PAIRED_FROM_SPREAD, cell_spread, fixed_task_variance
from passk_nb.stats.params import CI, MIN_TASKS, PAIRED_METHOD, SEED
from passk_nb.stats.summary import summarize

#: Default power and two-sided test level of the detectable difference.
POWER = 0.8
ALPHA = 0.05
#: Tasks simulated per plan row for the predicted half-widths (400 suites of 40 tasks).
N_SIM = 16_000
#: Two-arm suites simulated per plan row for the predicted new-task power (Monte-Carlo standard
#: error at most 0.5/√800 = 0.018), fewer for large T so that a row simulates at most POWER_TASKS
#: tasks (never fewer than 200 suites: standard error ≤ 0.035).
POWER_SUITES = 800
POWER_TASKS = 64_000


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
    for tasks, trials in designs:
        rng = np.random.default_rng([seed, tasks, trials])
        suites = min(max(100, -(-n_sim // tasks)), 1000)
        c = rng.binomial(trials, pop.sample((suites, tasks), rng)).ravel()
        parts.append((np.full(suites, tasks), np.full(c.size, trials), c))
    tasks_of, n, c = (np.concatenate(column) for column in zip(*parts, strict=True))
    # one key column (the suite, numbered design by design) and the task's place in its suite:
    # the counts layer factorises a few thousand values, not one per simulated task
    per_design = [len(part[0]) for part in parts]
    suite = np.repeat(np.arange(tasks_of.size), tasks_of)
    task = np.arange(suite.size) - np.repeat(np.cumsum(tasks_of) - tasks_of, tasks_of)
    # one row per (suite, task), sorted as counts sorts: the Counts summarize would build from it
    table = pd.DataFrame({"suite": suite, "task": task, "n": n, "c": c, "n_infra": np.zeros_like(n)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a declined interval is the prediction: NaN
        out = summarize(Counts(table, ("suite",), "exclude", "counts"), k=k, ci=ci)
    widths = pd.DataFrame(
        {
            "design": np.repeat(np.arange(len(designs)), per_design)[out["suite"].to_numpy()],
            "new": out["pass^k_hi"] - out["pass^k_lo"],
            "these": out["pass^k_fixed_hi"] - out["pass^k_fixed_lo"],
        }
    )
    mean = widths.groupby("design").mean() / 2  # NaN only where every suite's interval was declined
    return mean["new"].to_numpy(), mean["these"].to_numpy()


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


class Draws:
    """What :func:`simulated_power` draws whatever the difference it simulates: the tasks' latent
    normals per T and arm a's successes per design (with the generator's state after them, from
    which arm b's are drawn). Give one to every call on the same arm a (:func:`detectable_new`
    and :func:`~passk_nb.stats.design.plan` do): the later calls draw only arm b's successes, and
    their powers are those of calls without it, bit for bit."""

    def __init__(self) -> None:
        self.normals: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
        self.p_a: dict[tuple[int, ...], list[tuple[Population, np.ndarray]]] = {}
        self.arm_a: dict[tuple[int, ...], list[tuple[Population, np.ndarray, Mapping[str, Any]]]] = {}

    def latent(self, seed: int, tasks: int, size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """The tasks' standard normals (z_a and the independent part of z_b), ``size`` suites × T."""
        key = (seed, tasks, *size)
        if key not in self.normals:
            rng = np.random.default_rng([seed, 2, tasks])
            self.normals[key] = (rng.standard_normal(size), rng.standard_normal(size))
        return self.normals[key]

    def successes_a(
        self, seed: int, arms: TwoArms, trials: int, z_a: np.ndarray
    ) -> tuple[np.ndarray, np.random.Generator]:
        """Arm a's successes of a design and the generator, in the state in which arm b's are drawn."""
        tasks = z_a.shape[1]
        rng = np.random.default_rng([seed, 2, tasks, trials])
        kept = self.arm_a.setdefault((seed, trials, *z_a.shape), [])
        for pop, c_a, state in kept:
            if pop is arms.a:
                rng.bit_generator.state = state
                return c_a, rng
        c_a = rng.binomial(trials, self._p_a(seed, arms, z_a)).astype(np.min_scalar_type(trials))
        kept.append((arms.a, c_a, rng.bit_generator.state))
        return c_a, rng

    def _p_a(self, seed: int, arms: TwoArms, z_a: np.ndarray) -> np.ndarray:
        """Arm a's p of the tasks (one draw for every design of one T)."""
        kept = self.p_a.setdefault((seed, *z_a.shape), [])
        for pop, p in kept:
            if pop is arms.a:
                return p
        kept.append((arms.a, arms.sample_a(z_a)))
        return kept[-1][1]


def simulated_power(
    joint: TwoArms | Sequence[TwoArms],
    k: int,
    designs: Sequence[tuple[int, int]],
    *,
    alpha: float = ALPHA,
    suites: int = POWER_SUITES,
    tasks_cap: int = POWER_TASKS,
    seed: int = SEED,
    draws: Draws | None = None,
) -> np.ndarray:
    """The power of :func:`compare`'s new-task decision at two-sided level ``alpha``, for each
    design (tasks T, trials n): the share of two-arm suites drawn from ``joint`` in which compare's
    interval excludes 0. The suites go through compare's own per-task values and interval
    (:func:`pass_hat_k`, :func:`fixed_task_variance`, and its paired interval,
    :data:`~passk_nb.stats.intervals.PAIRED_FROM_SPREAD`, from :func:`cell_spread` over each
    suite's distinct (c_a, c_b) as :func:`summarize` computes a spread: compare's pass^k row
    without its other columns), so the prediction is the test users get. NaN below
    :data:`MIN_TASKS` tasks, where compare declines.

    ``joint``: one joint population for every design, or one per design (:func:`detectable_new`
    asks each design at its own difference). ``suites`` per design, fewer where T·suites would pass
    ``tasks_cap`` (never fewer than 200). The tasks' latent normals are drawn once per T (from
    ``seed`` and T), their trials once per design, whatever the joint: common random numbers, so
    the power at two differences differs by the difference, not by the draw. ``draws``
    (:class:`Draws`) keeps them, and arm a's successes, for the next call on the same arm a.

    >>> from passk_nb.stats.forecast import Mixture
    >>> pop = Population(mixture=Mixture(0.2, 0.1, 2.0, 1.0))
    >>> level = simulated_power(two_arms(pop, pop, 2, 0.0, 0.8), 2, [(40, 8)])
    >>> bool(level[0] < 0.1)  # no difference: about the test's level
    True
    """
    joints = [joint] * len(designs) if isinstance(joint, TwoArms) else list(joint)
    if len(joints) != len(designs):
        raise ValueError(f"one joint population per design: {len(joints)} for {len(designs)} designs")
    draws = Draws() if draws is None else draws
    drawn: dict[tuple[object, ...], np.ndarray] = {}  # designs of one T share arm b's p
    parts: list[tuple[np.ndarray, ...]] = []
    sizes: list[int] = []  # suites of each design
    for (tasks, trials), arms in zip(designs, joints, strict=True):
        normals = draws.latent(seed, tasks, (min(suites, max(200, tasks_cap // tasks)), tasks))
        key_b = (tasks, id(arms.b), arms.r)
        if key_b not in drawn:
            drawn[key_b] = arms.sample_b(*normals)
        c_a, rng = draws.successes_a(seed, arms, trials, normals[0])
        c_b = rng.binomial(trials, shifted(drawn[key_b], arms.shift))
        # compare's per-task pass^k and fixed-task variance (PairedTasks.from_counts), read per
        # distinct (suite, c_a, c_b): every task of a design has the same trials
        suite, a, b, weight = _suite_cells(c_a, c_b, trials)
        n, c = np.full(trials + 1, trials), np.arange(trials + 1)
        value, variance = np.asarray(pass_hat_k(n, c, k)), fixed_task_variance(n, c, k)
        parts.append((suite + sum(sizes), weight, value[b] - value[a], variance[a] + variance[b]))
        sizes.append(len(c_a))
    group, weight, diff, floor = (np.concatenate(column)[:, None] for column in zip(*parts, strict=True))
    # compare's new-task interval of pass^k (its default method, one column) from the cells
    # (summarize's route to the same spread) and its decision; its clipping moves no bound past 0
    interval = PAIRED_FROM_SPREAD[PAIRED_METHOD]
    lo, hi = interval(*cell_spread(group[:, 0], weight, diff, floor, sum(sizes)), ci=1 - alpha)
    new = (lo[:, 0] > 0) | (hi[:, 0] < 0)
    design = np.repeat(np.arange(len(designs)), sizes)
    power_new = np.bincount(design, new, len(designs)) / np.asarray(sizes)
    small = np.array([tasks < MIN_TASKS for tasks, _ in designs])
    return np.where(small, np.nan, power_new)


def _suite_cells(c_a: np.ndarray, c_b: np.ndarray, trials: int) -> tuple[np.ndarray, ...]:
    """The distinct (suite, c_a, c_b) of a design's successes (suites × T, every task ``trials``
    trials): the suite, c_a and c_b of each, and its number of tasks (a float)."""
    m = trials + 1
    key = ((np.arange(c_a.shape[0])[:, None] * m + c_a) * m + c_b).ravel()
    if c_a.shape[0] * m * m <= 4 * key.size:  # small range: counted, no sort
        count = np.bincount(key, minlength=c_a.shape[0] * m * m)
        at = np.flatnonzero(count)
        weight = count[at]
    else:
        at, weight = np.unique(key, return_counts=True)
    suite, rest = np.divmod(at, m * m)
    return suite, *np.divmod(rest, m), weight.astype(float)


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
    draws: Draws | None = None,
) -> np.ndarray:
    """The difference (arm b better) at which :func:`simulated_power` reaches ``power``, per design:
    the new-task mdd that, fed back as ``diff``, gives that power (up to its Monte-Carlo error).

    Secant steps on the probit of the simulated power, from ``start`` (the paired-t formula,
    :func:`detectable`) and ``known`` (a difference and the powers already simulated at it), each
    step one :func:`simulated_power` of every design at its own difference; the last step's
    estimate is returned (the power curve under a log-odds shift is steeper than the normal curve
    the formula assumes, so the formula alone misses the power). Every step reuses the tasks'
    normals and arm a's successes (``draws``, :class:`Draws`: those of the call that gave ``known``
    when given). NaN where T <
    :data:`MIN_TASKS` or no shift of arm b reaches the power.

    >>> from passk_nb.stats.forecast import Mixture
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
    draws = Draws() if draws is None else draws
    for step in range(steps + 1):
        d = np.clip(d, 1e-4, 0.999 * top)
        joints = [_joint_at(pop_a, pop_b, k, float(x), rho) for x in d]
        values = simulated_power(joints, k, chosen, alpha=alpha, suites=suites, seed=seed, draws=draws)
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
