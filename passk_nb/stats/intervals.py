"""Interval machinery: the fixed-task variance, Clopper-Pearson per task, the cluster bootstrap over tasks."""

from __future__ import annotations

import numpy as np
from scipy import stats as sps

from passk_nb.stats.counts import (
    group_sums,
)
from passk_nb.stats.estimators import pass_hat_k

#: Largest number of weights drawn in one bootstrap block.
_BLOCK = 1 << 22


def fixed_task_variance(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    """Unbiased estimate of Var(C(c,k)/C(n,k)): U² − C(c,2k)/C(n,2k); NaN where n < 2k."""
    return pass_hat_k(n, c, k) ** 2 - pass_hat_k(n, c, 2 * k)


def clopper_pearson(n: np.ndarray, c: np.ndarray, k: int, ci: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-task intervals: the exact interval for p mapped through 1 − (1 − p)^k and p^k."""
    tail = (1 - ci) / 2
    with np.errstate(invalid="ignore"):
        p_lo = np.where(c > 0, sps.beta.ppf(tail, c, n - c + 1), 0.0)
        p_hi = np.where(c < n, sps.beta.ppf(1 - tail, c + 1, n - c), 1.0)
    defined = n >= k
    lo = np.column_stack([1 - (1 - p_lo) ** k, p_lo**k])
    hi = np.column_stack([1 - (1 - p_hi) ** k, p_hi**k])
    return np.where(defined[:, None], lo, np.nan), np.where(defined[:, None], hi, np.nan)


def cluster_bootstrap(
    gid: np.ndarray, values: np.ndarray, n_groups: int, *, ci: float, n_boot: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of each group's mean over tasks, resampling tasks with replacement.

    ``gid`` (sorted) gives each row's group, ``values`` is (rows, m). Groups with the
    same number of tasks share one draw and one matrix product. Returns lo and hi of
    shape (n_groups, m); NaN for groups with fewer than two tasks.
    """
    m = values.shape[1]
    lo, hi = nan_interval(n_groups, m)
    sizes = np.bincount(gid, minlength=n_groups)
    for size in np.unique(sizes[sizes >= 2]):
        groups = np.flatnonzero(sizes == size)
        rows = values[np.isin(gid, groups)].reshape(groups.size, size, m)
        block = rows.transpose(1, 0, 2).reshape(size, groups.size * m)
        means = _resampled_means(block, n_boot, seed)
        bounds = np.quantile(means, [(1 - ci) / 2, (1 + ci) / 2], axis=0).reshape(2, groups.size, m)
        lo[groups], hi[groups] = bounds
    return lo, hi


def _resampled_means(block: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Column means of ``block`` over ``n_boot`` resamples of its rows: shape (n_boot, columns).

    Each resample is a row of multinomial counts (how often each task was drawn), so all
    resamples are one matrix product. The draw depends only on ``seed`` and the row count.
    """
    size = block.shape[0]
    rng = np.random.default_rng([seed, size])
    means = np.empty((n_boot, block.shape[1]))
    step = max(1, _BLOCK // size)
    for start in range(0, n_boot, step):
        rows = min(step, n_boot - start)
        draws = rng.integers(0, size, size=(rows, size)) + size * np.arange(rows)[:, None]
        counts = np.bincount(draws.ravel(), minlength=rows * size).reshape(rows, size)
        means[start : start + rows] = counts @ block / size
    return means


def group_corr(
    gid: np.ndarray, va: np.ndarray, vb: np.ndarray, mean_a: np.ndarray, mean_b: np.ndarray, n_groups: int
) -> np.ndarray:
    """Pearson correlation of the per-task values of the two arms, per group and metric."""
    da, db = va - mean_a[gid], vb - mean_b[gid]
    sxy, sxx, syy = (group_sums(gid, x, n_groups) for x in (da * db, da**2, db**2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return sxy / np.sqrt(sxx * syy)


def nan_interval(n_groups: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full((n_groups, m), np.nan), np.full((n_groups, m), np.nan)
