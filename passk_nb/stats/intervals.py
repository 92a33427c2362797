"""Interval machinery: the fixed-task variance; the Korn–Graubard, Student-t and cluster-bootstrap
intervals over tasks; Clopper–Pearson per task.

*These tasks, re-rolled*: per task, the largest exact variance of its estimator for p in its 80 %
Jeffreys interval, summed over tasks / T². *New tasks like these*: :func:`korn_graubard` for a
suite's mean, :func:`korn_graubard_paired` for paired differences, both floored at the tasks' own
trial-to-trial variance (:func:`plugin_task_variance`, :func:`fixed_task_variance`); callers
decline both below :data:`passk_nb.stats.params.MIN_TASKS` tasks.

*Task families* (``cluster=``): the same intervals with the family as the sampling unit
(:func:`unit_spread`, :func:`unit_bootstrap`, fed by :func:`units`).

Every choice was made by simulation (``benchmarks/coverage.py``): ``docs/methods/intervals.md``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence

import numpy as np
from scipy.special import betainccinv, betaincinv, gammaln, ndtri, stdtrit

from passk_nb.stats._grouping import distinct_codes, group_means, group_sums
from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.params import FIXED_LEVEL, METHOD, PAIRED_METHODS

#: Largest number of weights drawn in one bootstrap block.
_BLOCK = 1 << 22


def estimator_variance(n: np.ndarray, c: np.ndarray, k: int, q: np.ndarray) -> np.ndarray:
    """Exact Var(C(C, k)/C(n, k)) for C ~ Binomial(n, q); NaN where n < k.

    Uses C(c, k)² = Σᵢ C(c, 2k − i)·(2k − i)!/(i!·(k − i)!²) and E[C(C, m)] = C(n, m)·qᵐ, so the
    cost is k terms per task whatever n is.

    >>> round(float(estimator_variance(np.array([4]), np.array([4]), 2, np.array([0.9]))[0]), 6)
    0.07425
    """
    n, c, q = (np.asarray(x) for x in (n, c, q))
    n_f = n.astype(float)
    log_a, u = _log_coefficients(n_f[..., None], k)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(u <= n_f[..., None], np.exp(log_a + u * np.log(q[..., None])), 0.0)
    variance = np.maximum(terms.sum(axis=-1) - q.astype(float) ** (2 * k), 0.0)
    return np.where(n >= k, variance, np.nan)


def _log_coefficients(n: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The terms aᵢ·pᵘⁱ of E[C(C, k)²]/C(n, k)² (:func:`estimator_variance`), i = 0..k on a new
    last axis of the float array ``n``: log aᵢ, and uᵢ = 2k − i, the size of the union of two
    k-subsets sharing i trials (the term is 0 where uᵢ > n)."""
    i = np.arange(k + 1, dtype=float)
    u = 2 * k - i
    with np.errstate(divide="ignore", invalid="ignore"):
        log_a = (
            2 * gammaln(k + 1)
            + 2 * gammaln(n - k + 1)
            - gammaln(i + 1)
            - 2 * gammaln(k - i + 1)
            - gammaln(np.maximum(n - u, 0) + 1)
            - gammaln(n + 1)
        )
    return log_a, u


def fixed_task_variance(
    n: np.ndarray, c: np.ndarray, k: int, *, trials: int | None = None, level: float = FIXED_LEVEL
) -> np.ndarray:
    """Variance of the per-task pass^k estimate for a re-run of this task: the largest
    :func:`estimator_variance` over p in the task's :data:`~passk_nb.stats.params.FIXED_LEVEL`
    Jeffreys interval (from 0 when c = 0, to 1 when c = n), so that a task whose few trials look
    certain is not taken for certain. Positive whenever n ≥ k; NaN where n < k. For pass@k pass the
    failures n − c (the pass^k form applied to failures). ``trials``: the variance of a re-run with
    that many trials instead of n (the interval still comes from c of n); ``level``: the Jeffreys
    interval's level. :func:`fixed_task_variances` at one k.

    >>> fixed_task_variance(np.array([4, 4, 4]), np.array([4, 1, 0]), 2).round(4).tolist()
    [0.1115, 0.0893, 0.0212]
    """
    return fixed_task_variances(n, c, (k,), trials=trials, level=level)[0]


def fixed_task_variances(
    n: np.ndarray, c: np.ndarray, ks: Sequence[int], *, trials: int | None = None, level: float = FIXED_LEVEL
) -> np.ndarray:
    """:func:`fixed_task_variance` at every k of ``ks``: shape (len(ks), *n.shape), each k's the
    same as its own call. The estimator's variance is unimodal in p (0 at p = 0 and 1, one peak
    between; checked for n ≤ 400, k ≤ 20 in the tests), so its largest value over an interval is
    at the peak clipped to the interval: one peak per distinct n and k (:func:`_peaks`) and one
    evaluation per cell and k, the Jeffreys interval computed once for every k.

    >>> fixed_task_variances(np.array([4, 4]), np.array([4, 1]), [1, 2]).round(4).tolist()
    [[0.0495, 0.0625], [0.1115, 0.0893]]
    """
    n, c = np.broadcast_arrays(np.asarray(n), np.asarray(c))
    cn, cc, where = _cells(n.ravel(), c.ravel())
    with np.errstate(invalid="ignore"):
        lo = np.where(cc <= 0, 0.0, betaincinv(cc + 0.5, cn - cc + 0.5, (1 - level) / 2))
        hi = np.where(cc >= cn, 1.0, betaincinv(cc + 0.5, cn - cc + 0.5, (1 + level) / 2))
    rerun = cn if trials is None else np.full_like(cn, trials)
    sizes, size_of = np.unique(rerun, return_inverse=True)
    peaks = _peaks(sizes, ks)[:, size_of.ravel()]
    out = np.empty((len(ks), cn.size))
    for j, k in enumerate(ks):
        q = np.clip(peaks[j], lo, hi)
        out[j] = estimator_variance(rerun[:, None], np.zeros((cn.size, 1)), k, q[:, None])[:, 0]
    return out[:, np.ravel(where)].reshape(len(ks), *n.shape)


def _peaks(n: np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """Where :func:`estimator_variance` at n trials peaks in p, per k of ``ks`` and n (floats; k > n
    gives 0): the root in (0, 1) of its derivative p^(k−1)·Σⱼ bⱼ·p^(k−j), bⱼ = aⱼ·uⱼ less 2k for
    j = 0 (aⱼ·p^uⱼ its terms, uⱼ = 2k − j), bisected to within 2⁻⁴⁸. The polynomial is
    evaluated by Horner's rule, every (k, n) elementwise and the shorter ones led by exact zeros: a
    root is the same whichever other k and n are asked."""
    top = max(ks)
    rows = []
    n_f = np.asarray(n, dtype=float)[:, None]
    for k in ks:
        log_a, u = _log_coefficients(n_f, k)
        with np.errstate(invalid="ignore", over="ignore"):
            b = np.where(u <= n_f, np.exp(log_a) * u, 0.0)
        b[:, 0] -= 2 * k
        rows.append(np.pad(b, ((0, 0), (top - k, 0))))  # (n, top + 1), highest power first
    coef = np.concatenate(rows)
    low, high = np.zeros(coef.shape[0]), np.ones(coef.shape[0])
    for _ in range(48):
        p = (low + high) / 2
        h = coef[:, 0].copy()
        for j in range(1, top + 1):
            h *= p
            h += coef[:, j]
        rising = h > 0
        low, high = np.where(rising, p, low), np.where(rising, high, p)
    return ((low + high) / 2).reshape(len(ks), -1)


def _cells(n: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (n, c) pairs as floats and each row's index among them (whole counts through
    :func:`distinct_codes`, without sorting; sorting pairs of floats dominated a large call)."""
    whole = n.size and np.issubdtype(n.dtype, np.integer) and np.issubdtype(c.dtype, np.integer)
    if whole and c.min() >= 0 and n.min() >= 0:
        codes, where = distinct_codes(n, c)
        cn, cc = np.divmod(codes, int(c.max()) + 1)
        return cn.astype(float), cc.astype(float), where
    cells, where = np.unique(np.stack([n, c]).astype(float), axis=1, return_inverse=True)
    return cells[0], cells[1], where


def plugin_task_variance(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    """:func:`estimator_variance` at the one point p̃ = (c + ½)/(n + 1): each task's trial-to-trial
    spread at its estimated rate, the floor of the spread over tasks in :func:`summarize`'s
    new-task intervals (Korn–Graubard held with it; :func:`compare`'s paired interval did not, and
    floors at :func:`fixed_task_variance`).

    >>> plugin_task_variance(np.array([4, 4, 4]), np.array([4, 1, 0]), 2).round(4).tolist()
    [0.0742, 0.0262, 0.0023]
    """
    n, c = np.asarray(n), np.asarray(c)
    return estimator_variance(n, c, k, (c + 0.5) / (n + 1))


def fixed_interval(
    value: np.ndarray, se: np.ndarray, ci: float, *, lower: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """The *these tasks, re-rolled* interval from a value and its fixed-task standard error:
    value ± z·se, clipped to [lower, 1] (``lower=-1`` for a difference); the one place that turns
    ``se_fixed`` into bounds."""
    z = float(ndtri(0.5 + ci / 2))
    return np.clip(value - z * se, lower, 1.0), np.clip(value + z * se, lower, 1.0)


def unbiased_variance(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    """The unbiased estimate U² − C(c, 2k)/C(n, 2k) of the estimator's variance (NaN where n < 2k).

    Kept for the coverage benchmark: it is 0 whenever c = n or c < k, which made the old fixed-task
    interval zero-width.
    """
    return np.asarray(pass_hat_k(n, c, k)) ** 2 - np.asarray(pass_hat_k(n, c, 2 * k))


def _spread(
    gid: np.ndarray, values: np.ndarray, floor: np.ndarray, n_groups: int, unit: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group: the number of tasks T, the mean and s², s² floored at the mean fixed-task variance
    (the spread of per-task estimates over a population of tasks includes each task's
    trial-to-trial spread, so it cannot be smaller). With ``unit`` (each task's family):
    :func:`unit_spread`, in families. T is a column (n_groups, 1), or per column with ``unit``:
    either broadcasts against the means."""
    if unit is not None:
        return unit_spread(gid, np.ones_like(values), values, floor, n_groups, unit)
    sizes = np.bincount(gid, minlength=n_groups).astype(float)
    means = group_means(gid, values, sizes)
    with np.errstate(invalid="ignore", divide="ignore"):
        s2 = group_sums(gid, (values - means[gid]) ** 2, n_groups) / (sizes[:, None] - 1)
    return sizes[:, None], means, np.fmax(s2, group_means(gid, floor, sizes))


def cell_spread(
    cell_group: np.ndarray, weight: np.ndarray, values: np.ndarray, floor: np.ndarray, n_groups: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_spread` of tasks given as cells: ``weight[i, j]`` tasks of group ``cell_group[i]``
    have the value ``values[i, j]`` and fixed-task variance ``floor[i, j]`` in column j (weight 0
    leaves a cell out of a column: a task with fewer trials than k has no value at k). Returns T,
    the mean and the floored s², each (n_groups, columns); the cost is per distinct cell, not per
    task.

    >>> cell_spread(np.array([0, 0]), np.array([[3.0], [1.0]]), np.array([[1.0], [0.0]]),
    ...             np.zeros((2, 1)), 1)
    (array([[4.]]), array([[0.75]]), array([[0.25]]))
    """
    sizes = group_sums(cell_group, weight, n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = group_sums(cell_group, values * weight, n_groups) / sizes
        s2 = group_sums(cell_group, weight * (values - means[cell_group]) ** 2, n_groups) / (sizes - 1)
        floor_mean = group_sums(cell_group, floor * weight, n_groups) / sizes
    return sizes, means, np.fmax(s2, floor_mean)


def units(group: np.ndarray, unit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's sampling unit: (unit id, the group of each unit), ids numbered 0.. in group order
    so that units never span groups (a family shared by two models is two units) and the units of a
    group are contiguous. ``unit`` holds any integer codes (:func:`passk_nb.stats.counts.unit_codes`).

    >>> [x.tolist() for x in units(np.array([0, 0, 0, 1]), np.array([7, 3, 7, 7]))]
    [[1, 0, 1, 2], [0, 0, 1]]
    """
    pairs, unit_id = np.unique(np.column_stack([group, unit]).astype(np.int64), axis=0, return_inverse=True)
    return unit_id.ravel(), pairs[:, 0]


def unit_spread(
    cell_group: np.ndarray,
    weight: np.ndarray,
    values: np.ndarray,
    floor: np.ndarray,
    n_groups: int,
    unit: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`cell_spread` with families as the sampling unit: the count of families F, the mean
    over tasks m, and s² on the scale of one family, so that s²/F is the clustered (CR1) variance
    of m, F/(F − 1)·Σ_f (S_f − m·T_f)²/T² (S_f, T_f: family f's sum of values and its tasks). It
    is floored at F·(mean fixed-task variance)/T, the variance m would have from trial noise alone.
    Every interval reading (sizes, means, s²) then uses F − 1 degrees of freedom. With each task its
    own family this is :func:`cell_spread` exactly. ``unit`` gives each row's family (any codes;
    :func:`units` separates the groups); ``weight`` (rows, m) as in :func:`cell_spread`.

    >>> g, w, f = np.zeros(4, dtype=int), np.ones((4, 1)), np.zeros((4, 1))
    >>> v = np.array([[1.0], [1.0], [0.0], [0.0]])
    >>> unit_spread(g, w, v, f, 1, np.arange(4))[2], cell_spread(g, w, v, f, 1)[2]  # tasks: the same
    (array([[0.33333333]]), array([[0.33333333]]))
    >>> unit_spread(g, w, v, f, 1, np.array([0, 0, 1, 1]))  # two families, each all pass or all fail
    (array([[2.]]), array([[0.5]]), array([[0.5]]))
    """
    unit_id, unit_group = units(cell_group, unit)
    n_units = unit_group.size
    weight = np.broadcast_to(weight, values.shape)
    sizes = group_sums(cell_group, weight, n_groups)
    unit_sums = group_sums(unit_id, np.where(weight > 0, values, 0.0) * weight, n_units)
    unit_sizes = group_sums(unit_id, weight, n_units)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = group_sums(unit_group, unit_sums, n_groups) / sizes
        families = group_sums(unit_group, (unit_sizes > 0).astype(float), n_groups)
        residual = group_sums(unit_group, (unit_sums - means[unit_group] * unit_sizes) ** 2, n_groups)
        s2 = families**2 / (families - 1) * residual / sizes**2
        floor_mean = group_sums(cell_group, floor * weight, n_groups) / sizes
        return families, means, np.fmax(s2, families * floor_mean / sizes)


def design_effect(values: np.ndarray, floor: np.ndarray, unit: np.ndarray) -> float:
    """Kish's design effect of a mean of per-task ``values`` whose tasks come in families ``unit``:
    the clustered variance of the mean (:func:`unit_spread`) over its variance were the tasks
    independent (:func:`cell_spread`, the same floor), at least 1; 1 when either is undefined.
    A plan counts T tasks in such families as T / deff independent tasks.

    >>> design_effect(np.array([1.0, 1.0, 0.0, 0.0]), np.zeros(4), np.array([0, 0, 1, 1]))
    3.0
    """
    gid, ones = np.zeros(len(values), dtype=np.int64), np.ones((len(values), 1))
    v, f = np.asarray(values, float)[:, None], np.asarray(floor, float)[:, None]
    families, _, clustered = unit_spread(gid, ones, v, f, 1, unit)
    tasks, _, independent = cell_spread(gid, ones, v, f, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = float((clustered / families)[0, 0] / (independent / tasks)[0, 0])
    return max(1.0, ratio) if np.isfinite(ratio) else 1.0


def unit_bootstrap(
    unit_group: np.ndarray,
    sums: np.ndarray,
    sizes: np.ndarray,
    n_groups: int,
    *,
    ci: float,
    n_boot: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of each group's mean over tasks, resampling families with replacement
    and keeping each family's tasks together: a resample's mean is Σ draws·S_f / Σ draws·T_f.

    ``unit_group`` (sorted) gives each family's group, ``sums`` (families, m) its sum of values over
    the tasks that have one, ``sizes`` (families, m) how many tasks have one. The draw is
    :func:`cluster_bootstrap`'s over families (it depends only on ``seed`` and the number of
    families); a resample that drew no task with a value is left out. NaN for groups with fewer
    than two families.

    >>> lo, hi = unit_bootstrap(np.zeros(2, dtype=int), np.array([[3.0], [0.0]]), np.array([[3.0], [3.0]]),
    ...                         1, ci=0.9, n_boot=200, seed=0)
    >>> float(lo[0, 0]), float(hi[0, 0])
    (0.0, 1.0)
    """
    m = sums.shape[1]
    lo, hi = nan_interval(n_groups, m)
    counts = np.bincount(unit_group, minlength=n_groups)
    for size in np.unique(counts[counts >= 2]):
        groups = np.flatnonzero(counts == size)
        rows = np.isin(unit_group, groups)
        s_block, t_block = (
            x[rows].reshape(groups.size, size, m).transpose(1, 0, 2).reshape(size, groups.size * m)
            for x in (sums, sizes)
        )
        means = np.empty((n_boot, groups.size * m))
        for start, drawn in _draws(int(size), n_boot, seed):
            with np.errstate(invalid="ignore", divide="ignore"):
                means[start : start + len(drawn)] = (drawn @ s_block) / (drawn @ t_block)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a column without any value: NaN
            bounds = np.nanquantile(means, [(1 - ci) / 2, (1 + ci) / 2], axis=0)
        lo[groups], hi[groups] = bounds.reshape(2, groups.size, m)
    return lo, hi


def student_t(
    gid: np.ndarray,
    values: np.ndarray,
    floor: np.ndarray,
    n_groups: int,
    *,
    ci: float,
    unit: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean ± t(T − 1)·s/√T per group and column (unclipped), s² floored as in :func:`_spread`.

    ``values`` (rows, m) are per-task values, ``floor`` (rows, m) their fixed-task variances.
    NaN for groups with fewer than two tasks. With ``unit`` (each task's family), the clustered
    variance and F − 1 degrees of freedom (:func:`unit_spread`).
    """
    sizes, means, s2 = _spread(gid, values, floor, n_groups, unit)
    return t_interval(sizes, means, s2, ci=ci)


def t_interval(
    sizes: np.ndarray, means: np.ndarray, s2: np.ndarray, *, ci: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`student_t` from the spread (T, mean, floored s²; T broadcastable to the means)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        half = stdtrit(sizes - 1, 0.5 + ci / 2) * np.sqrt(s2 / sizes)
    half = np.where(sizes < 2, np.nan, half)
    return means - half, means + half


def korn_graubard(
    gid: np.ndarray,
    values: np.ndarray,
    floor: np.ndarray,
    n_groups: int,
    *,
    ci: float,
    unit: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Clopper–Pearson with an effective number of tasks, for a mean of per-task values in [0, 1].

    A mean m of T values in [0, 1] with variance s² behaves like a proportion from
    T_eff = m(1 − m)/(s²/T) Bernoulli trials (Korn & Graubard 1998, with their t(T − 1) correction
    T_eff·(z/t)²); the interval is the exact binomial one for m·T_eff successes. s² is floored at
    the fixed-task variance, and its ratio to the Bernoulli variance m(1 − m) is shrunk toward 1 by
    one pseudo-task ((T − 1)·φ + 1)/T: a sample of a few tasks that all look alike says little
    about how alike new tasks are. T_eff is never below T: no population of values in [0, 1] with
    mean m varies more than Bernoulli(m), so the t correction, which took T_eff to T/2 at five tasks,
    only widened intervals that already covered 99 % (issue 49: 13 % narrower at five tasks, none
    wider, coverage ≥ 93 % on every truth of ``benchmarks/coverage.py``). Values near 0 or 1 (pass@k
    of a good agent, pass^k of a weak one) get the asymmetric interval they need, where
    mean ± t·s/√T under-covered. NaN for groups
    with fewer than two tasks. With ``unit`` (each task's family) T is the number of families and
    s²/T the clustered variance (:func:`unit_spread`): Korn and Graubard's design-effect form.
    """
    sizes, means, s2 = _spread(gid, values, floor, n_groups, unit)
    return kg_interval(sizes, means, s2, ci=ci)


def kg_interval(
    sizes: np.ndarray, means: np.ndarray, s2: np.ndarray, *, ci: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`korn_graubard` from the spread (T, mean, floored s²; T broadcastable to the means)."""
    tail = (1 - ci) / 2
    t, z = stdtrit(np.maximum(sizes - 1, 1), 1 - tail), ndtri(1 - tail)
    bernoulli = np.clip(means, 1e-12, 1 - 1e-12) * (1 - np.clip(means, 1e-12, 1 - 1e-12))
    with np.errstate(invalid="ignore", divide="ignore"):
        phi = np.clip(s2 / bernoulli, 1e-12, 1.0)
        phi = ((sizes - 1) * phi + 1) / sizes
        t_eff = np.maximum(sizes / phi * (z / t) ** 2, sizes)  # never fewer than T: see korn_graubard
        lo, hi = exact_binomial(np.clip(means, 0.0, 1.0) * t_eff, t_eff, tail)
    small = np.broadcast_to(sizes < 2, lo.shape)
    lo[small], hi[small] = np.nan, np.nan
    return lo, hi


def korn_graubard_paired(
    gid: np.ndarray,
    values: np.ndarray,
    floor: np.ndarray,
    n_groups: int,
    *,
    ci: float,
    unit: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Korn–Graubard for a mean of per-task differences in [−1, 1] (:func:`compare`'s default):
    the exact binomial interval for u = (d + 1)/2 at T_eff = m̃(1 − m̃)/(s²/4/T) effective tasks
    with their t(T − 1) correction, mapped back; s² floored at both arms' fixed-task variance, as
    :func:`student_t`'s. The Bernoulli variance is read at m̃ = (T·u + ½)/(T + 1), not at u: at
    u = 0 or 1 (every task broke) u(1 − u) = 0 would set T_eff to T·(z/t)², and six tasks that
    all went from 4/4 to 0/4 would not differ. Unlike :func:`korn_graubard` it adds no Bernoulli
    pseudo-task: on a difference near 0 that pseudo-task is a task at ±1, which widened compare's
    interval by 29 % and held its false positives near 0 %, while the floor already keeps tasks
    that look alike from being taken for certain (``docs/methods/comparisons.md``). NaN below two
    tasks; with ``unit``, families are the sampling unit (:func:`unit_spread`).
    """
    sizes, means, s2 = _spread(gid, values, floor, n_groups, unit)
    return paired_kg_interval(sizes, means, s2, ci=ci)


def paired_kg_interval(
    sizes: np.ndarray, means: np.ndarray, s2: np.ndarray, *, ci: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`korn_graubard_paired` from the spread (T, mean difference, floored s²; T
    broadcastable to the means).

    >>> lo, hi = paired_kg_interval(np.array([10.0]), np.array([0.0]), np.array([0.04]), ci=0.95)
    >>> round(float(lo[0]), 3), round(float(hi[0]), 3)  # t: ± 0.143
    (-0.147, 0.147)
    """
    return _paired_kg(sizes, means, s2, np.asarray(1 - ci, dtype=float))


def _paired_kg(
    sizes: np.ndarray, means: np.ndarray, s2: np.ndarray, alpha: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`paired_kg_interval` at level 1 − ``alpha`` (an array, one per mean: the p-value's
    bisection), every quantile read from its own tail so that a tiny alpha keeps its precision."""
    tail = alpha / 2
    t, z = -stdtrit(np.maximum(sizes - 1, 1), tail), -ndtri(tail)
    u = np.clip((np.asarray(means, dtype=float) + 1) / 2, 0.0, 1.0)  # the mean on [0, 1]
    shrunk = (sizes * u + 0.5) / (sizes + 1)  # where the Bernoulli variance is read: never 0
    with np.errstate(invalid="ignore", divide="ignore"):
        phi = np.clip(s2 / 4 / (shrunk * (1 - shrunk)), 1e-12, 1.0)
        t_eff = sizes / phi * (z / t) ** 2
        lo, hi = exact_binomial(u * t_eff, t_eff, tail)
    lo, hi = 2 * lo - 1, 2 * hi - 1
    small = np.broadcast_to(sizes < 2, lo.shape)
    lo[small], hi[small] = np.nan, np.nan
    return lo, hi


#: compare's paired interval from a spread (T, mean difference, floored s²), by method: what
#: :func:`passk_nb.stats.design.power.simulated_power` reads from cells of simulated suites.
PAIRED_FROM_SPREAD = dict(zip(PAIRED_METHODS[:2], (paired_kg_interval, t_interval), strict=True))


def korn_graubard_paired_p_value(
    gid: np.ndarray, values: np.ndarray, floor: np.ndarray, n_groups: int, unit: np.ndarray | None = None
) -> np.ndarray:
    """The two-sided p-value of a zero mean difference under :func:`korn_graubard_paired`, per
    group and column: the level 1 − ci at which its interval touches 0 (found by bisection on
    log(1 − ci); the interval widens with ci), so p ≤ 1 − ci exactly when the interval at ``ci``
    excludes 0, to 1e-12 in log p; a p below 1e-40 is given as 1e-40. 1 for groups with fewer
    than two tasks (no interval).

    >>> gid, values, floor = np.zeros(4, dtype=int), np.array([[0.1], [0.2], [0.3], [0.2]]), np.zeros((4, 1))
    >>> p = korn_graubard_paired_p_value(gid, values, floor, 1)
    >>> lo, _ = korn_graubard_paired(gid, values, floor, 1, ci=1 - float(p[0, 0]))  # touches 0
    >>> bool(0.01 < p[0, 0] < 0.05), abs(round(float(lo[0, 0]), 8))
    (True, 0.0)
    """
    sizes, means, s2 = _spread(gid, values, floor, n_groups, unit)
    sizes = np.broadcast_to(sizes, means.shape)
    low, high = np.full(means.shape, -40.0), np.zeros(means.shape)  # log10(1 − ci): p in [1e-40, 1]
    for _ in range(64):
        mid = (low + high) / 2
        lo, hi = _paired_kg(sizes, means, s2, 10.0**mid)
        excludes = (lo > 0) | (hi < 0)
        low, high = np.where(excludes, low, mid), np.where(excludes, mid, high)  # p ≤ 1 − ci: lower
    p = 10.0**high
    return np.where((sizes < 2) | ~np.isfinite(means) | ~np.isfinite(s2), 1.0, p)


def exact_binomial(
    x: np.ndarray, size: np.ndarray, tail: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    """Clopper–Pearson bounds for x successes of ``size`` (both may be fractional: an effective
    count), ``tail`` on each side; every bound read from its own tail, so a tiny tail keeps its
    precision. The core of :func:`clopper_pearson` and both Korn–Graubard intervals.

    >>> [round(float(b), 4) for b in exact_binomial(np.array(3.0), np.array(5.0), 0.025)]
    [0.1466, 0.9473]
    """
    lo = np.where(x > 0, betaincinv(x, size - x + 1, tail), 0.0)
    hi = np.where(x < size, betainccinv(x + 1, size - x, tail), 1.0)
    return lo, hi


def clopper_pearson(n: np.ndarray, c: np.ndarray, k: int, ci: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-task intervals: the exact interval for p mapped through p ↦ 1 − (1 − p)^k and p ↦ p^k."""
    tail = (1 - ci) / 2
    with np.errstate(invalid="ignore"):
        p_lo, p_hi = exact_binomial(c, n, tail)
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
    means = np.empty((n_boot, block.shape[1]))
    for start, counts in _draws(size, n_boot, seed):
        means[start : start + len(counts)] = counts @ block / size
    return means


def _draws(size: int, n_boot: int, seed: int) -> Iterator[tuple[int, np.ndarray]]:
    """The bootstrap draw of ``size`` tasks: blocks (first resample, counts) of at most ``_BLOCK``
    weights, counts[i, j] how often resample start + i drew task j. Depends only on ``seed`` and
    ``size``."""
    rng = np.random.default_rng([seed, size])
    step = max(1, _BLOCK // size)
    for start in range(0, n_boot, step):
        rows = min(step, n_boot - start)
        draws = rng.integers(0, size, size=(rows, size)) + size * np.arange(rows)[:, None]
        yield start, np.bincount(draws.ravel(), minlength=rows * size).reshape(rows, size)


def task_resamples(size: int, n_boot: int, seed: int) -> np.ndarray:
    """The bootstrap draw of ``size`` tasks as one (n_boot, size) matrix of how often each resample
    drew each task: the same draw as :func:`cluster_bootstrap`'s (it depends only on ``seed`` and
    ``size``), for a statistic that is not a mean of per-task values but a function of per-task
    sums (each resample's sums are one matrix product).

    >>> w = task_resamples(4, 3, 0)
    >>> w.shape, w.sum(axis=1).tolist()
    ((3, 4), [4, 4, 4])
    """
    out = np.empty((n_boot, size), dtype=np.int64)
    for start, counts in _draws(size, n_boot, seed):
        out[start : start + len(counts)] = counts
    return out


def cell_bootstrap(
    cell_group: np.ndarray,
    cell_row: np.ndarray,
    weight: np.ndarray,
    values: np.ndarray,
    n_groups: int,
    *,
    ci: float,
    n_boot: int,
    seed: int,
    covered: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`cluster_bootstrap` of tasks given as cells: ``weight[i]`` tasks of group
    ``cell_group[i]`` share the values ``values[cell_row[i]]`` (``values`` is (rows, m): the distinct
    per-task values, shared by every group); cells sorted by group, the cells of a group on distinct
    rows.

    A group's tasks are taken in cell order, the draw is :func:`cluster_bootstrap`'s (it depends
    only on ``seed`` and the group's number of tasks, so groups do not influence each other), and
    a resample's mean needs only how often it drew each distinct row: cumulative sums of the draw at
    the cells' boundaries, then one (groups × resamples, rows) by (rows, m) matrix product, instead
    of a product over every task.

    ``covered`` (rows, m, bool): only covered rows enter a column's mean (a task with fewer trials
    than k has no value at k). Tasks are still resampled from all of the group's tasks, so every
    column (every k of a curve) comes from the same draw: each resample's mean is over the covered
    tasks it drew, and a resample that drew none is left out. Where every task is covered this is
    the plain resampled mean. NaN for columns with fewer than two (covered) tasks.

    >>> values = np.array([[1.0], [0.0]])  # one group: 3 tasks at 1, 1 task at 0
    >>> lo, hi = cell_bootstrap(np.array([0, 0]), np.array([0, 1]), np.array([3, 1]), values, 1,
    ...                         ci=0.9, n_boot=500, seed=0)
    >>> float(lo[0, 0]), float(hi[0, 0])
    (0.25, 1.0)
    """
    m, n_rows = values.shape[1], values.shape[0]
    lo, hi = nan_interval(n_groups, m)
    weight = np.asarray(weight).astype(np.int64)
    sizes = np.bincount(cell_group, weights=weight, minlength=n_groups).astype(np.int64)
    cover = np.ones_like(values) if covered is None else covered.astype(float)
    shared = np.column_stack([np.where(cover > 0, values, 0.0), cover])  # sums, then covered counts
    first = np.searchsorted(cell_group, np.arange(n_groups + 1))  # cells of group g: first[g]:first[g+1]
    ends = np.cumsum(weight)
    ends -= (ends - weight)[first[cell_group]]  # each cell's end within its group
    q = [(1 - ci) / 2, (1 + ci) / 2]
    for size in np.unique(sizes[sizes >= 2]):
        groups = np.flatnonzero(sizes == size)
        means = np.empty((groups.size, n_boot, m))
        chunk = max(1, _BLOCK // (n_boot * n_rows))  # groups per matrix product
        for start, counts in _draws(int(size), n_boot, seed):
            drawn = np.zeros((len(counts), size + 1), dtype=np.int64)
            np.cumsum(counts, axis=1, out=drawn[:, 1:])
            for at in range(0, groups.size, chunk):
                part = groups[at : at + chunk]
                cells = np.concatenate([np.arange(first[g], first[g + 1]) for g in part])
                local = np.repeat(np.arange(part.size), first[part + 1] - first[part])
                per_row = np.zeros((part.size, n_rows, len(counts)))  # draws of each distinct row
                per_row[local, cell_row[cells]] = (
                    drawn[:, ends[cells]] - drawn[:, ends[cells] - weight[cells]]
                ).T
                product = per_row.transpose(0, 2, 1).reshape(-1, n_rows) @ shared
                with np.errstate(invalid="ignore", divide="ignore"):
                    ratio = product[:, :m] / product[:, m:]
                means[at : at + part.size, start : start + len(counts)] = ratio.reshape(part.size, -1, m)
        flat = means.transpose(1, 0, 2).reshape(n_boot, groups.size * m)
        bounds = np.empty((2, flat.shape[1]))
        some_none = np.isnan(flat).any(axis=0)  # resamples that drew no covered task: left out
        bounds[:, ~some_none] = np.quantile(flat[:, ~some_none], q, axis=0)
        if some_none.any():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # no covered task at all: NaN
                bounds[:, some_none] = np.nanquantile(flat[:, some_none], q, axis=0)
        lo[groups], hi[groups] = bounds.reshape(2, groups.size, m)
    few = group_sums(cell_group, cover[cell_row] * weight[:, None], n_groups) < 2
    lo[few], hi[few] = np.nan, np.nan
    return lo, hi


def population_interval(
    gid: np.ndarray,
    values: np.ndarray,
    floor: np.ndarray,
    n_groups: int,
    *,
    method: str,
    ci: float,
    n_boot: int,
    seed: int,
    min_tasks: int,
    lower: float = 0.0,
    unit: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The "new tasks like these" interval per group: (lo, hi, declined), clipped to [lower, 1].

    ``method`` is ``"korn-graubard"`` (for a difference, ``lower=-1``: :func:`korn_graubard_paired`),
    ``"t"`` or ``"bootstrap"``. ``declined`` marks groups with
    at least one but fewer than ``min_tasks`` tasks (with ``unit``, each task's family: families,
    the sampling unit); their interval is NaN.
    """
    if method == METHOD:  # a difference (lower = −1) has its own form: korn_graubard_paired
        kg = korn_graubard if lower == 0.0 else korn_graubard_paired
        lo, hi = kg(gid, values, floor, n_groups, ci=ci, unit=unit)
    elif method == "t":
        lo, hi = student_t(gid, values, floor, n_groups, ci=ci, unit=unit)
    elif unit is None:
        lo, hi = cluster_bootstrap(gid, values, n_groups, ci=ci, n_boot=n_boot, seed=seed)
    else:
        unit_id, unit_group = units(gid, unit)
        ones = np.ones_like(values)
        lo, hi = unit_bootstrap(
            unit_group,
            group_sums(unit_id, values, unit_group.size),
            group_sums(unit_id, ones, unit_group.size),
            n_groups,
            ci=ci,
            n_boot=n_boot,
            seed=seed,
        )
    sizes = np.bincount(gid if unit is None else units(gid, unit)[1], minlength=n_groups)
    declined = (sizes < min_tasks) & (sizes >= 1)
    lo[declined], hi[declined] = np.nan, np.nan
    return np.clip(lo, lower, 1.0), np.clip(hi, lower, 1.0), declined


def check_method(method: str, methods: tuple[str, ...], min_tasks: int) -> None:
    """ValueError unless ``method`` is one of ``methods`` and ``min_tasks`` a whole number ≥ 2."""
    if method not in methods:
        raise ValueError(f"method must be one of {list(methods)}; got method={method!r}")
    if isinstance(min_tasks, bool) or not isinstance(min_tasks, int | np.integer) or min_tasks < 2:
        raise ValueError(f"min_tasks must be a whole number ≥ 2; got min_tasks={min_tasks!r}")


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
