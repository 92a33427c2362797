"""Exact tests for many 2×2 tables at once: one per task, all tasks in one array computation.

A per-task comparison of two arms (a: ``c_a`` successes in ``n_a`` trials, b: ``c_b`` in
``n_b``) is the 2×2 table ``[[c_a, n_a - c_a], [c_b, n_b - c_b]]``. Calling
``scipy.stats.fisher_exact`` once per task costs a few milliseconds each; here every table's
hypergeometric probabilities are evaluated in one vectorised call of scipy's own
distribution functions, and identical tables are computed once, so the p-values equal
scipy's while thousands of tasks take milliseconds.

>>> import numpy as np
>>> fisher_exact_2x2(c_a=[4, 3, 2], n_a=4, c_b=[0, 1, 2], n_b=4).round(4)
array([0.0286, 0.4857, 1.    ])

:func:`boschloo_exact_2x2` is the unconditional test of the same tables (no margin held fixed):
its p-value is the largest chance, over the unknown common success rate, of a table at least as
extreme, bounded between the points of a fine grid so that its size never exceeds alpha.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import gammaln, xlogy

__all__ = ["boschloo_exact_2x2", "fisher_exact_2x2"]

#: scipy's relative tolerance for "as probable as the observed table" (``fisher_exact``).
_RELATIVE_TIE = 1e-14
#: Probabilities evaluated per chunk (bounds memory for many large tables).
_CHUNK_CELLS = 2_000_000
#: Largest amount by which a Boschloo p-value may exceed the true supremum (its grid's bound).
_GRID_SLACK = 1e-6
#: Most points in the Boschloo nuisance grid (more trials: a larger, still rigorous, slack).
_GRID_MAX = 2**15
#: Relative tolerance for "a table whose Fisher p is at most the observed one" (mirror tables).
_LEVEL_TIE = 1e-9


def fisher_exact_2x2(c_a: ArrayLike, n_a: ArrayLike, c_b: ArrayLike, n_b: ArrayLike) -> np.ndarray:
    """Two-sided Fisher exact p-values of the tables ``[[c_a, n_a - c_a], [c_b, n_b - c_b]]``.

    The arguments are whole numbers or arrays of them (broadcast together); the result has
    their broadcast shape. Each p-value equals
    ``scipy.stats.fisher_exact(table, alternative="two-sided").pvalue`` (the sum of the
    probabilities of every table with the same margins that is at most as probable as the
    observed one; 1 when a margin is zero).

    >>> print(f"{float(fisher_exact_2x2(10, 10, 0, 10)):.6g}")
    1.08251e-05
    >>> fisher_exact_2x2([1, 2], [3, 3], [3, 3], [3, 3]).round(3)
    array([0.4, 1. ])
    >>> fisher_exact_2x2(5, 4, 0, 4)
    Traceback (most recent call last):
    ...
    ValueError: successes must be between 0 and the trials in every table; c_a=[5], n_a=[4] break it
    """
    arrays = np.broadcast_arrays(*(np.asarray(x) for x in (c_a, n_a, c_b, n_b)))
    shape = arrays[0].shape
    columns = _tables(arrays)
    if not columns[0].size:
        return np.empty(shape)
    tables, inverse = unique_rows(np.column_stack(columns))
    c_a_, n_a_, c_b_, n_b_ = tables.T
    successes = c_a_ + c_b_
    # A zero margin (an arm without trials, no success or no failure at all): p = 1.
    p = np.ones(len(tables))
    varies = (n_a_ > 0) & (n_b_ > 0) & (successes > 0) & (successes < n_a_ + n_b_)
    if varies.any():
        p[varies] = _fisher_varying(tables[varies])
    return p[inverse.ravel()].reshape(shape)


def boschloo_exact_2x2(c_a: ArrayLike, n_a: ArrayLike, c_b: ArrayLike, n_b: ArrayLike) -> np.ndarray:
    """Two-sided Boschloo p-values of the tables ``[[c_a, n_a - c_a], [c_b, n_b - c_b]]``, size held.

    Boschloo's test orders tables by their Fisher p-value and takes, as p-value, the supremum over
    the common success rate π of the chance (two independent binomials at π) of a table with a
    Fisher p at most the observed one. The supremum is taken on a grid of π fine enough that,
    with the bound |f''| ≤ N(N − 1)·max|Δ²b| of the Bernstein polynomial f between grid points,
    the p-value is never below the true supremum (by at most 1e-6 for N ≤ 180 trials): a search
    such as ``scipy.stats.boschloo_exact``'s default misses the maximum and rejects too often
    (3/4 vs 0/4: 0.047 where the chance at π = ½ is 0.070). Never larger than Fisher's p.
    Arguments broadcast like :func:`fisher_exact_2x2`'s.

    >>> boschloo_exact_2x2([4, 3, 2], 4, 0, 4).round(4)  # Fisher: 0.0286, 0.1429, 0.4286
    array([0.0078, 0.0703, 0.1785])
    """
    arrays = np.broadcast_arrays(*(np.asarray(x) for x in (c_a, n_a, c_b, n_b)))
    shape = arrays[0].shape
    columns = _tables(arrays)
    fisher = fisher_exact_2x2(*columns)
    if not fisher.size:
        return np.empty(shape)
    tables, inverse = unique_rows(np.column_stack(columns))
    p = fisher_exact_2x2(*tables.T)
    margins, which = unique_rows(tables[:, [1, 3]])
    for m, (m_a, m_b) in enumerate(margins):
        rows = np.flatnonzero(which == m)
        if m_a > 0 and m_b > 0:
            bound = _boschloo_margins(int(m_a), int(m_b), tables[rows, 0], tables[rows, 2])
            p[rows] = np.minimum(p[rows], bound)
    return p[inverse.ravel()].reshape(shape)


def _boschloo_margins(n_a: int, n_b: int, c_a: np.ndarray, c_b: np.ndarray) -> np.ndarray:
    """Boschloo's p of the tables (c_a, c_b) with trials (n_a, n_b): the supremum over π of
    f(π) = P_π(Fisher p ≤ the observed one), bounded between the points of a grid."""
    x, y = (g.ravel() for g in np.meshgrid(np.arange(n_a + 1), np.arange(n_b + 1), indexing="ij"))
    total, s = n_a + n_b, x + y
    conditional = np.exp(_log_choose(n_a, x) + _log_choose(n_b, y) - _log_choose(total, s))
    # Fisher's two-sided p of every table: the conditional mass at most as probable, per stratum s.
    statistic = np.empty(x.size)
    for stratum in range(total + 1):
        at = np.flatnonzero(s == stratum)
        mass = np.sort(conditional[at])
        upto = np.searchsorted(mass, conditional[at] * (1 + _LEVEL_TIE), side="right")
        statistic[at] = np.cumsum(mass)[upto - 1]
    observed = statistic[c_a * (n_b + 1) + c_b]
    # f is the Bernstein polynomial sum_s b_s·Binom(s; N, π), b_s = P(region | x + y = s).
    inside = statistic[None, :] <= observed[:, None] * (1 + _LEVEL_TIE)
    b = np.zeros((observed.size, total + 1))
    np.add.at(b.T, s, (inside * conditional).T)
    curvature = total * (total - 1) * np.abs(np.diff(b, 2, axis=1)).max(axis=1, initial=0.0)
    points = int(min(_GRID_MAX, np.ceil(np.sqrt(2 * total * (total - 1) / (8 * _GRID_SLACK))) + 1))
    grid = np.linspace(0.0, 1.0, max(points, 2))
    return np.minimum(_bernstein_max(b, grid) + curvature * (grid[1] - grid[0]) ** 2 / 8, 1.0)


def _log_choose(n: int, k: np.ndarray) -> np.ndarray:
    return np.asarray(gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1))


def _bernstein_max(b: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """max over ``grid`` of each row's Bernstein polynomial sum_s b_s·Binom(s; N, π)."""
    total = b.shape[1] - 1
    best = np.zeros(len(b))
    step = max(1, _CHUNK_CELLS // (total + 1))
    s = np.arange(total + 1)[:, None]
    log_choose = _log_choose(total, s)
    for start in range(0, grid.size, step):
        pi = grid[None, start : start + step]
        basis = np.exp(log_choose + xlogy(s, pi) + xlogy(total - s, 1 - pi))  # Binom(s; N, π)
        best = np.maximum(best, (b @ basis).max(axis=1))
    return best


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=0, return_inverse=True)`` for rows of whole numbers ≥ 0, several
    times faster: each row is first packed into one int64 (when its columns fit).

    >>> table, inverse = unique_rows(np.array([[2, 1], [0, 3], [2, 1]]))
    >>> table.tolist(), inverse.tolist()
    ([[0, 3], [2, 1]], [1, 0, 1])
    """
    if rows.size and rows.ndim == 2 and rows.min() >= 0:
        sizes = rows.max(axis=0).astype(np.int64) + 1
        if np.prod(sizes.astype(float)) < 2.0**62:
            shape = tuple(int(s) for s in sizes)
            keys = np.ravel_multi_index(tuple(rows.T), shape)
            if np.prod(sizes.astype(float)) <= 4 * len(keys) + 1024:  # small range: no sort at all
                present = np.bincount(keys, minlength=int(np.prod(sizes)))
                at = np.flatnonzero(present)
                rank = np.cumsum(present > 0) - 1
                return np.column_stack(np.unravel_index(at, shape)).astype(rows.dtype), rank[keys]
            _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
            return rows[first], inverse.ravel()
    unique_, inverse_ = np.unique(rows, axis=0, return_inverse=True)
    return unique_, inverse_.ravel()


def _tables(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The four columns (c_a, n_a, c_b, n_b) as flat int64, refused unless 0 ≤ c ≤ n everywhere."""
    columns = [_whole_numbers(x, name) for x, name in zip(arrays, ("c_a", "n_a", "c_b", "n_b"), strict=True)]
    for c, n, side in ((columns[0], columns[1], "a"), (columns[2], columns[3], "b")):
        bad = (c < 0) | (c > n)
        if bad.any():
            raise ValueError(
                "successes must be between 0 and the trials in every table; "
                f"c_{side}={c[bad][:5].tolist()}, n_{side}={n[bad][:5].tolist()} break it"
            )
    return columns


def _whole_numbers(x: np.ndarray, name: str) -> np.ndarray:
    if x.dtype.kind not in "iub" and not (
        x.dtype.kind == "f" and np.all(np.isfinite(x) & (x == np.round(x)))
    ):
        raise ValueError(f"{name} must hold whole numbers (counts of trials); got {x.ravel()[:5].tolist()}")
    return x.astype(np.int64).ravel()


def _fisher_varying(tables: np.ndarray) -> np.ndarray:
    """scipy's two-sided algorithm, one array operation per step, for rows (c_a, n_a, c_b, n_b)
    whose margins are all positive."""
    from scipy.stats import hypergeom  # here: scipy.stats costs seconds to import, summarize needs none

    c_a, n_a, c_b, n_b = tables.T
    total, successes = n_a + n_b, c_a + c_b  # margins: hypergeom(M=total, n=n_a, N=successes)
    dist = hypergeom(total, n_a, successes)
    low, high = np.maximum(0, successes - n_b), np.minimum(successes, n_a)  # the support
    mode = (successes + 1) * (n_a + 1) // (total + 2)
    p_exact, p_mode = dist.pmf(c_a), dist.pmf(mode)
    threshold = p_exact * (1 + _RELATIVE_TIE)

    # Observed count below the mode: the far tail is every x beyond the last x ≥ mode whose
    # probability reaches the threshold. Above the mode: every x up to the last x ≤ mode whose
    # probability stays at or below it. The probability falls away from the mode on both sides,
    # so each end is found by bisection, as scipy finds it: a few probabilities per table, not one
    # per x of the support (whose length grows with the trials).
    below = c_a < mode
    start = np.where(below, mode, low)  # the side searched: [mode, high] below, [low, mode] above
    stop = np.where(below, high, mode) + 1
    lo, hi = start.copy(), stop.copy()  # the first x in [start, stop) where the side's test fails
    while (searching := np.flatnonzero(lo < hi)).size:
        mid = (lo[searching] + hi[searching]) // 2
        pmf = hypergeom.pmf(mid, total[searching], n_a[searching], successes[searching])
        fails = np.where(below[searching], pmf < threshold[searching], pmf > threshold[searching])
        hi[searching] = np.where(fails, mid, hi[searching])
        lo[searching] = np.where(fails, lo[searching], mid + 1)
    last = lo - 1  # below: the last x ≥ mode at or above the threshold; above: the last x ≤ mode below it
    # each table's two tails: the near one from its count, the far one from the bisection's end
    p = np.empty(len(tables))
    for side, near, far in ((below, hypergeom.cdf, hypergeom.sf), (~below, hypergeom.sf, hypergeom.cdf)):
        args = total[side], n_a[side], successes[side]
        p[side] = near(np.where(below, c_a, c_a - 1)[side], *args) + far(last[side], *args)
    p = np.minimum(p, 1.0)

    ties_mode = np.abs(p_exact - p_mode) / np.maximum(p_exact, p_mode) <= _RELATIVE_TIE
    return np.where(ties_mode, 1.0, p)
