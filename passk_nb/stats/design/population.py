"""A population of tasks' success rates: what a plan simulates suites from.

:class:`Population` is the mixture :func:`~passk_nb.stats.forecast.fit_mixture` fits to a pilot
(always + never + Beta) or, when the pilot cannot identify it, the pilot's own tasks at the shrunk
p̃ = (c + ½)/(n + 1) (:func:`pilot_population`). :func:`components` splits a task's pass^k variance
into its between- and within-task parts at n trials; :class:`TwoArms` joins two arms' populations
by a Gaussian copula, arm b's log-odds shifted (:func:`two_arms`), with the correlation a two-arm
pilot implies (:func:`pilot_rho`). The model: ``docs/methods/planning.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.forecast import Mixture, fit_mixture, unidentified
from passk_nb.stats.intervals import fixed_task_variance

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
        return self.sample_a(z_a), self.sample_b(z_a, noise)

    def sample_a(self, z_a: np.ndarray) -> np.ndarray:
        """Arm a's p of tasks from their standard normals (the first of :meth:`sample`)."""
        return self.a.quantile(sps.norm.cdf(z_a))

    def sample_b(self, z_a: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """Arm b's p, not yet shifted (the second of :meth:`sample`)."""
        z_b = self.r * z_a + np.sqrt(1 - self.r**2) * noise
        return self.b.quantile(sps.norm.cdf(z_b))


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
