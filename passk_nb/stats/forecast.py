"""Forecast pass^K far beyond the n trials you ran, from a model of the tasks.

:func:`forecast` fits the per-task success probabilities as a mixture of "always" (p = 1),
"never" (p = 0) and a Beta for the flaky rest, by maximum likelihood over tasks, twice (with and
without the "always" share); :class:`Readings` averages the two by Akaike weight, with an interval
spanning both models' parametric-bootstrap intervals. Every row also carries model-free bounds
(``bound_lo``/``bound_hi``, :func:`data_bounds`). The forecast is declined (NaN, ``given`` False,
a warning) below :data:`MIN_TASKS` tasks, without a task that both passed and failed, and beyond
n when the goodness-of-fit check (:func:`deviance`, :data:`FIT_LEVEL`) flags the counts.

The model, why two readings, and its coverage on sixteen shapes
(``benchmarks/forecast_validation.py``): ``docs/methods/forecast.md``.

Beyond n the interval's lower end is never above :func:`all_pass_floor` (tasks that passed every
trial at the lowest common p their trials allow). The point is shown only up to
:func:`point_horizon` (K ≤ n, the trials run): past n it was biased by more than 0.05 on some
truths, so it is NaN there with a note, and the interval, which still covers, is the forecast.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd
from scipy import optimize, sparse, special
from scipy import stats as sps
from scipy.special import betaln, gammaln, xlogy

from passk_nb.stats._grouping import group_ids
from passk_nb.stats.checks import check_k, check_options
from passk_nb.stats.counts import Counts, as_counts, round_columns
from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.intervals import exact_binomial
from passk_nb.stats.params import CI, INFRA, N_BOOT, SEED, share_docs
from passk_nb.stats.result import described

#: Fewer tasks than this and the forecast declines (NaN and a warning). Measured with
#: benchmarks/forecast_validation.py (n = 4, 200 suites): the interval still covered at 5 and 8
#: tasks (95–100 %), but only by spanning 0.7–0.77 of [0, 1], with a point error (RMSE) near 0.2 —
#: no more than the model-free bounds say; at 10 tasks the width starts to fall (0.66, 0.45 at 40).
MIN_TASKS = 10
#: Fewer flaky tasks (0 < c < n) than this and the Beta part cannot be estimated.
MIN_FLAKY = 2
#: Below this p-value of the fit check (:func:`deviance` against its parametric bootstrap) the
#: forecast beyond n is declined. Chosen on benchmarks/forecast_validation.py-style simulations
#: (seed 7, 20 suites of 40 tasks per cell): it flags 80 % of suites with 60 % of tasks at p = 0.98
#: and 40 % at 0.02 (n = 8), whose model interval covered pass^64 in about a third of suites, and
#: 0–15 % of suites from shapes the mixture describes.
FIT_LEVEL = 0.1


def point_horizon(min_n: int) -> int:
    """The largest K whose point forecast is shown when every task ran at least ``min_n`` trials:
    K ≤ n. Measured (``benchmarks/forecast_validation.py --bias``; sixteen truths, T = 20 and
    40, n = 4 and 8; table in docs/methods/forecast.md): up to n the point's |bias| stayed
    ≤ 0.044 on every truth but all tasks at p = 0.995, where the few suites given (those showing
    two tasks with a failure) read low, the unbiased observed pass^k as much; one trial past n it
    was already +0.06 (every task at p = 0.9, T = 20, n = 4), and at 2n up to +0.10. Past n the
    point is NaN and the interval, which kept its coverage, is what :func:`forecast` gives.

    >>> point_horizon(8)
    8
    """
    return int(min_n)


def hidden_note(min_n: int) -> str:
    """The note of a row whose point is not shown (K > :func:`point_horizon`)."""
    return (
        f"point not shown beyond K = {point_horizon(min_n)} (the n = {min_n} trials run): past n it "
        "was biased by more than 0.05 on some truths (docs/methods/forecast.md); "
        "the interval lo–hi holds: read it"
    )


#: Default K values of :func:`forecast`.
KS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)

# The (mean, concentration) grid of the Beta part that every fit searches first.
_MU = 1.0 / (1.0 + np.exp(-np.linspace(-6.0, 6.0, 31)))
_S = np.exp(np.linspace(np.log(0.05), np.log(2000.0), 25))
_GRID_MU, _GRID_S = (a.ravel() for a in np.meshgrid(_MU, _S, indexing="ij"))
#: The Beta part's (α, β) grid the mixture is fitted on (public for the benchmark of fit_grid).
GRID_A, GRID_B = _GRID_MU * _GRID_S, (1.0 - _GRID_MU) * _GRID_S
_CHUNK = 256
T = TypeVar("T", float, np.ndarray)


@dataclass(frozen=True)
class Mixture:
    """A population of tasks: shares at p = 1 and p = 0, and Beta(alpha, beta) for the rest."""

    share_always: float
    share_never: float
    alpha: float
    beta: float

    @property
    def share_flaky(self) -> float:
        return 1.0 - self.share_always - self.share_never

    def pass_hat(self, k: np.ndarray | int) -> np.ndarray:
        """E[p^k] over the population: share_always + share_flaky · ∏_{i<k}(α+i)/(α+β+i)."""
        return mixture_pass_hat(self.share_always, self.share_flaky, self.alpha, self.beta, k)

    def sample(self, size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Draw task success probabilities from the population."""
        u = rng.random(size)
        p = rng.beta(self.alpha, self.beta, size)
        return np.where(
            u < self.share_always, 1.0, np.where(u < self.share_always + self.share_never, 0.0, p)
        )


def beta_moment(alpha: np.ndarray | float, beta: np.ndarray | float, k: np.ndarray | int) -> np.ndarray:
    """E[p^k] for p ~ Beta(α, β): ∏_{i<k} (α+i)/(α+β+i), computed with log-gammas.

    >>> round(float(beta_moment(2.0, 1.0, 2)), 12)  # (2/3) * (3/4)
    0.5
    """
    a, b, k_ = np.asarray(alpha, float), np.asarray(beta, float), np.asarray(k, float)
    return np.exp(gammaln(a + k_) - gammaln(a) - gammaln(a + b + k_) + gammaln(a + b))


def mixture_pass_hat(
    share_always: np.ndarray | float,
    share_flaky: np.ndarray | float,
    alpha: np.ndarray | float,
    beta: np.ndarray | float,
    k: np.ndarray | int,
) -> np.ndarray:
    """Suite pass^k of the mixture: share_always + share_flaky · E[p^k | Beta(α, β)]."""
    return np.asarray(share_always) + np.asarray(share_flaky) * beta_moment(alpha, beta, k)


# Fitting --------------------------------------------------------------------------------------
#
# A task is its (n, c), and a replicate's likelihood needs only three kinds of cell: the tasks that
# passed every trial (one count per distinct n), those that failed every trial (likewise), and the
# flaky rest, whose term wf · f(c | n) splits into log wf per task plus Σ log f, a constant of the
# grid point. So the shares are fitted on at most two cells per distinct n, never on every (n, c).


@dataclass(frozen=True)
class ReplicateCells:
    """Sufficient statistics of R replicates of one group's tasks (n fixed, c drawn per replicate).

    ns: the distinct n (D,); all_pass, all_fail: tasks per (replicate, n) with c = n and c = 0
    (R, D); flaky: tasks with 0 < c < n per replicate (R,); mid: a sparse (R, U) count of the
    flaky tasks' patterns ``pattern_n``/``pattern_c`` (U,), for the Σ log f term.
    """

    ns: np.ndarray
    all_pass: np.ndarray
    all_fail: np.ndarray
    flaky: np.ndarray
    mid: sparse.csr_matrix
    pattern_n: np.ndarray
    pattern_c: np.ndarray

    @classmethod
    def of(cls, n: np.ndarray, c: np.ndarray) -> ReplicateCells:
        """n (T,), c (R, T) -> the cells of each replicate."""
        n, c = np.asarray(n, np.int64), np.atleast_2d(np.asarray(c, np.int64))
        ns, d = np.unique(n, return_inverse=True)
        reps, tasks = c.shape
        row = np.repeat(np.arange(reps), tasks)
        d_all = np.broadcast_to(d, c.shape).ravel()
        full, none = (c == n).ravel(), (c == 0).ravel()
        all_pass = np.bincount(row[full] * ns.size + d_all[full], minlength=reps * ns.size)
        all_fail = np.bincount(row[none] * ns.size + d_all[none], minlength=reps * ns.size)
        mid = ~(full | none)
        width = int(n.max()) + 1
        key = d_all[mid] * width + c.ravel()[mid]  # (which distinct n, c): D · width keys at most
        seen = np.bincount(key, minlength=ns.size * width) > 0  # no sort: O(tasks)
        keys, col = np.flatnonzero(seen), (np.cumsum(seen) - 1)[key]
        counts = sparse.csr_matrix(
            (np.ones(col.size), (row[mid], col)), shape=(reps, keys.size)
        )  # duplicates are summed
        return cls(
            ns,
            all_pass.reshape(reps, -1).astype(float),
            all_fail.reshape(reps, -1).astype(float),
            np.asarray(counts.sum(1)).ravel(),
            counts,
            ns[keys // width],
            keys % width,
        )

    @classmethod
    def draw(cls, fit: Mixture, n: np.ndarray, reps: int, rng: np.random.Generator) -> ReplicateCells:
        """The cells of ``reps`` suites drawn from ``fit`` with the tasks' n: tasks with the same n
        are exchangeable, so each n's counts are one multinomial draw over c = 0..n (the cost
        grows with the distinct n, not with the tasks)."""
        ns, sizes = np.unique(np.asarray(n, np.int64), return_counts=True)
        drawn = []
        for value, size in zip(ns, sizes, strict=True):
            c = np.arange(value + 1)
            pmf = (
                fit.share_flaky
                * np.exp(_log_pmf(np.full(c.size, value), c, np.array([fit.alpha]), np.array([fit.beta])))[0]
            )
            pmf[0] += fit.share_never
            pmf[-1] += fit.share_always
            pmf = np.clip(pmf, 0.0, None)  # a share of -1e-17 from rounding
            drawn.append(rng.multinomial(size, pmf / pmf.sum(), size=reps))
        mid = [d[:, 1:-1] for d in drawn]
        return cls(
            ns,
            np.column_stack([d[:, -1] for d in drawn]).astype(float),
            np.column_stack([d[:, 0] for d in drawn]).astype(float),
            sum(m.sum(1) for m in mid).astype(float),
            sparse.csr_matrix(np.hstack(mid).astype(float)),
            np.concatenate([np.full(v - 1, v) for v in ns]),
            np.concatenate([np.arange(1, v) for v in ns]),
        )

    def rows(self, start: int, stop: int) -> ReplicateCells:
        return ReplicateCells(
            self.ns,
            self.all_pass[start:stop],
            self.all_fail[start:stop],
            self.flaky[start:stop],
            self.mid[start:stop],
            self.pattern_n,
            self.pattern_c,
        )


def _log_pmf(n: np.ndarray, c: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """log beta-binomial pmf of c of n, shape (G, len(n))."""
    n, c, a, b = n[None, :], c[None, :], alpha[:, None], beta[:, None]
    log_choose = gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1)
    return np.minimum(log_choose + betaln(c + a, n - c + b) - betaln(a, b), 0.0)


def _terms(cells: ReplicateCells, alpha: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, ...]:
    """f(n | n) and f(0 | n) per (grid point, distinct n), and log f of the flaky patterns
    (U, G): a replicate's Σ log f over its flaky tasks is ``cells.mid @`` that."""
    f_all = np.exp(_log_pmf(cells.ns, cells.ns, alpha, beta))
    f_none = np.exp(_log_pmf(cells.ns, np.zeros_like(cells.ns), alpha, beta))
    log_f = _log_pmf(cells.pattern_n, cells.pattern_c, alpha, beta).T
    return f_all, f_none, log_f


def _mid_term(cells: ReplicateCells, log_f: np.ndarray) -> np.ndarray:
    """Σ log f over each replicate's flaky tasks, (R, G)."""
    if log_f.shape[0] == 0:
        return np.zeros((cells.flaky.size, log_f.shape[1]))
    return np.asarray(cells.mid @ log_f)


def _faces(
    m_all: np.ndarray,
    m_none: np.ndarray,
    m_mid: np.ndarray,
    mid_term: np.ndarray,
    f_all: np.ndarray,
    f_none: np.ndarray,
    always: bool = True,
) -> tuple[np.ndarray, ...]:
    """Maximise m_all·log(w1 + wf·f_all) + m_none·log(w0 + wf·f_none) + m_mid·log wf + mid_term
    over the shares, in closed form: the best of the concave problem's faces.

    m_* (R, 1); f_* and mid_term broadcast to (R, G). ``always=False`` holds w1 at 0.
    Returns loglik, w1, w0, wf, each (R, G).
    """
    total = m_all + m_none + m_mid
    shape = np.broadcast_shapes(mid_term.shape, f_all.shape, total.shape)
    q = np.maximum(1.0 - f_all - f_none, 1e-300)
    with np.errstate(divide="ignore", invalid="ignore"):
        wf_inner = m_mid / (total * q)
        wf_no_all = np.clip((m_all + m_mid) / (total * np.maximum(1.0 - f_none, 1e-300)), 0.0, 1.0)
        wf_no_none = np.clip((m_none + m_mid) / (total * np.maximum(1.0 - f_all, 1e-300)), 0.0, 1.0)
    zero, one = np.zeros(shape), np.ones(shape)
    candidates = [
        (m_all / total - wf_inner * f_all, m_none / total - wf_inner * f_none, wf_inner * one),
        (zero, 1.0 - wf_no_all, wf_no_all * one),
        (1.0 - wf_no_none, zero, wf_no_none * one),
        (zero, zero, one),
        (m_all / total * one, m_none / total * one, zero),
    ]
    if not always:  # the faces with share_always = 0
        candidates = candidates[1:2] + candidates[3:4]
    best = [np.full(shape, -np.inf), zero, zero, zero]
    for w1, w0, wf in candidates:
        w1, w0, wf = (np.broadcast_to(w, shape) for w in (w1, w0, wf))
        feasible = (w1 >= -1e-12) & (w0 >= -1e-12)
        w1, w0, wf = (np.clip(w, 0.0, 1.0) for w in (w1, w0, wf))
        with np.errstate(divide="ignore", invalid="ignore"):
            ll = xlogy(m_all, w1 + wf * f_all) + xlogy(m_none, w0 + wf * f_none) + xlogy(m_mid, wf)
            ll = np.where(m_mid > 0, ll + mid_term, ll)
        ll = np.where(feasible & ~np.isnan(ll), ll, -np.inf)
        better = ll > best[0]
        best = [
            np.where(better, ll, best[0]),
            *(np.where(better, w, b) for w, b in zip((w1, w0, wf), best[1:], strict=True)),
        ]
    return tuple(best)


def _pooled(cells: ReplicateCells, f_all: np.ndarray, f_none: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each replicate's task-weighted mean f(n | n) and f(0 | n) over its all-pass and all-fail
    tasks, (R, G): with these in :func:`_faces` the loglik is an upper bound (Jensen: log is
    concave), exact when one n."""
    out = []
    for m, f in ((cells.all_pass, f_all), (cells.all_fail, f_none)):
        size = m.sum(1, keepdims=True)
        out.append((m @ f.T) / np.where(size > 0, size, 1.0) + (size == 0) * f.mean(1)[None, :])
    return out[0], out[1]


def _em(
    cells: ReplicateCells,
    f_all: np.ndarray,
    f_none: np.ndarray,
    mid_term: np.ndarray,
    start: tuple[np.ndarray, ...],
    iterations: int,
    tol: float = 1e-9,
) -> tuple[np.ndarray, ...]:
    """EM over the shares with every all-pass and all-fail task's own n, from ``start``, until
    ``iterations`` or no share moves more than ``tol`` in an iteration.

    f_* (R, G, D) at each replicate's grid points; start, mid_term (R, G). The flaky tasks'
    responsibility is all theirs, so their cells only add m_mid to wf's update.
    """
    m_all, m_none = cells.all_pass[:, None, :], cells.all_fail[:, None, :]
    m_mid, total = (
        cells.flaky[:, None],
        (cells.all_pass.sum(1) + cells.all_fail.sum(1) + cells.flaky)[:, None],
    )
    w1, w0, wf = start
    previous = (w1, wf)
    for i in range(iterations):
        if i % 20 == 19:
            if w1.size == 0 or max(np.abs(w1 - previous[0]).max(), np.abs(wf - previous[1]).max()) < tol:
                break
        if i % 20 == 18:
            previous = (w1, wf)
        r1 = np.divide(
            m_all, w1[..., None] + wf[..., None] * f_all, out=np.zeros(f_all.shape), where=m_all > 0
        )
        r0 = np.divide(
            m_none, w0[..., None] + wf[..., None] * f_none, out=np.zeros(f_none.shape), where=m_none > 0
        )
        w1, w0, wf = (
            w1 * r1.sum(-1) / total,
            w0 * r0.sum(-1) / total,
            (wf * ((r1 * f_all).sum(-1) + (r0 * f_none).sum(-1)) + m_mid) / total,
        )
    with np.errstate(divide="ignore"):
        ll = (
            xlogy(m_all, w1[..., None] + wf[..., None] * f_all).sum(-1)
            + xlogy(m_none, w0[..., None] + wf[..., None] * f_none).sum(-1)
            + xlogy(m_mid, wf)
            + np.where(m_mid > 0, mid_term, 0.0)
        )
    return ll, w1, w0, wf


def _em_start(bound: tuple[np.ndarray, ...], always: bool) -> tuple[np.ndarray, ...]:
    """The pooled solution, nudged off the faces so EM can leave a share at 0 (not share_always
    without the "always" share)."""
    _, w1, w0, wf = bound
    mix = 0.05
    if always:
        return (1 - mix) * w1 + mix / 3, (1 - mix) * w0 + mix / 3, (1 - mix) * wf + mix / 3
    return np.zeros_like(w1), (1 - mix) * w0 + mix / 2, (1 - mix) * wf + mix / 2


def _profile(
    cells: ReplicateCells, alpha: np.ndarray, beta: np.ndarray, always: bool = True, iterations: int = 500
) -> tuple[np.ndarray, ...]:
    """Maximise the likelihood over the three shares for each (replicate, grid point);
    ``always=False`` holds share_always at 0. Returns loglik, w1, w0, wf, each (R, G)."""
    f_all, f_none, log_f = _terms(cells, alpha, beta)
    mid_term = _mid_term(cells, log_f)
    if cells.ns.size == 1:
        return _faces(
            cells.all_pass, cells.all_fail, cells.flaky[:, None], mid_term, f_all.T, f_none.T, always
        )
    pooled_all, pooled_none = _pooled(cells, f_all, f_none)
    m = (cells.all_pass.sum(1, keepdims=True), cells.all_fail.sum(1, keepdims=True), cells.flaky[:, None])
    bound = _faces(*m, mid_term, pooled_all, pooled_none, always)
    reps = cells.flaky.size
    return _em(
        cells,
        np.broadcast_to(f_all[None], (reps, *f_all.shape)),
        np.broadcast_to(f_none[None], (reps, *f_none.shape)),
        mid_term,
        _em_start(bound, always),
        iterations,
    )


def fit_grid(cells: ReplicateCells, always: bool = True, batch: int = 4, iterations: int = 100) -> np.ndarray:
    """Best grid fit per replicate: array (R, 4) of share_always, share_never, alpha, beta.

    One n: the closed form at every grid point. Mixed n: the closed form with pooled f is an
    upper bound at every grid point; EM runs only at the grid points with the highest bounds, in
    batches, until the best loglik found is at least the next bound (so the argmax is exact).
    """
    reps = cells.flaky.size
    out = np.empty((reps, 4))
    f_all, f_none, log_f = _terms(cells, GRID_A, GRID_B)
    for start in range(0, reps, _CHUNK):
        block = cells.rows(start, min(start + _CHUNK, reps))
        rows = np.arange(block.flaky.size)
        mid_term = _mid_term(block, log_f)
        if block.ns.size == 1:
            ll, w1, w0, _ = _faces(
                block.all_pass, block.all_fail, block.flaky[:, None], mid_term, f_all.T, f_none.T, always
            )
            best = np.argmax(ll, axis=1)
            out[start : start + rows.size] = np.column_stack(
                [w1[rows, best], w0[rows, best], GRID_A[best], GRID_B[best]]
            )
            continue
        pooled = _pooled(block, f_all, f_none)
        m = (block.all_pass.sum(1, keepdims=True), block.all_fail.sum(1, keepdims=True), block.flaky[:, None])
        bound = _faces(*m, mid_term, *pooled, always)
        order = np.argsort(-bound[0], axis=1)
        best_ll = np.full(rows.size, -np.inf)
        best = np.zeros((rows.size, 3))
        best_g = np.zeros(rows.size, np.int64)
        todo = rows
        for first in range(0, order.shape[1], batch):
            g = order[todo, first : first + batch]
            sub = ReplicateCells(
                block.ns,
                block.all_pass[todo],
                block.all_fail[todo],
                block.flaky[todo],
                block.mid[todo],
                block.pattern_n,
                block.pattern_c,
            )
            at = (todo[:, None], g)
            ll, w1, w0, wf = _em(
                sub,
                f_all[g],
                f_none[g],
                mid_term[at],
                _em_start(tuple(x[at] for x in bound), always),
                iterations,
            )
            pick = np.argmax(ll, axis=1)
            here = np.arange(todo.size)
            better = ll[here, pick] > best_ll[todo]
            upd = todo[better]
            best_ll[upd] = ll[here, pick][better]
            best[upd] = np.column_stack([w1[here, pick], w0[here, pick], wf[here, pick]])[better]
            best_g[upd] = g[here, pick][better]
            nxt = first + batch
            if nxt >= order.shape[1]:
                break
            todo = todo[best_ll[todo] < bound[0][todo, order[todo, nxt]] - 1e-9]
            if todo.size == 0:
                break
        out[start : start + rows.size] = np.column_stack(
            [best[:, 0], best[:, 1], GRID_A[best_g], GRID_B[best_g]]
        )
    return out


def fit_mixture(n: np.ndarray, c: np.ndarray, always: bool = True) -> Mixture:
    """Maximum-likelihood mixture for tasks with n trials and c successes each
    (``always=False``: with no "always" share, the tasks that never failed being Beta's too).

    >>> m = fit_mixture(np.array([4] * 6), np.array([4, 4, 4, 2, 1, 0]))
    >>> round(m.share_always, 2) >= 0.3 and 0 <= m.share_never <= 1
    True
    >>> fit_mixture(np.array([4, 4, 4]), np.array([4, 4, 4])).share_always
    1.0
    """
    n, c = np.asarray(n, np.int64), np.asarray(c, np.int64)
    cells = ReplicateCells.of(n, c[None, :])
    w1, w0, a, b = fit_grid(cells, always)[0]

    def objective(x: np.ndarray) -> float:
        mu, s = 1.0 / (1.0 + np.exp(-x[0])), np.exp(x[1])
        ll = _profile(cells, np.array([mu * s]), np.array([(1.0 - mu) * s]), always)[0]
        return -float(ll[0, 0])

    start = np.array([np.log(a / b), np.log(a + b)])
    bounds = [(-9.0, 9.0), (np.log(0.01), np.log(1e4))]
    res = optimize.minimize(
        objective, start, method="Nelder-Mead", bounds=bounds, options={"xatol": 1e-4, "fatol": 1e-9}
    )
    if res.fun <= objective(start):
        mu, s = 1.0 / (1.0 + np.exp(-res.x[0])), float(np.exp(res.x[1]))
        a, b = mu * s, (1.0 - mu) * s
        _, w1_, w0_, _ = _profile(cells, np.array([a]), np.array([b]), always)
        w1, w0 = float(w1_[0, 0]), float(w0_[0, 0])
    return Mixture(float(w1), float(w0), float(a), float(b))


def bootstrap_mixtures(
    fit: Mixture, n: np.ndarray, n_boot: int, rng: np.random.Generator, always: bool = True
) -> np.ndarray:
    """Parametric bootstrap: refit (with or without the "always" share) on n_boot suites drawn
    from ``fit`` with the tasks' n.

    Returns (n_boot, 4): share_always, share_never, alpha, beta per replicate.
    """
    return fit_grid(ReplicateCells.draw(fit, n, n_boot, rng), always)


def deviance(n: np.ndarray, c: np.ndarray, fits: np.ndarray) -> np.ndarray:
    """How far each suite's counts are from its fitted mixture: 2 × (loglik of the counts'
    own frequencies per n − loglik under the fit). c (R, T); fits (R, 4) as from
    :func:`bootstrap_mixtures`. Returns (R,).

    >>> fit = np.array([[0.5, 0.5, 1.0, 1.0]])  # half always, half never: fits {4, 0} exactly
    >>> float(deviance(np.array([4, 4]), np.array([[4, 0]]), fit)[0])
    0.0
    """
    n = np.asarray(n, np.int64)
    return _deviance(n, ReplicateCells.of(n, c), fits)


def _deviance(n: np.ndarray, cells: ReplicateCells, fits: np.ndarray) -> np.ndarray:
    """:func:`deviance` from the suites' cells."""
    w1, w0, a, b = (x[:, None] for x in np.asarray(fits, float).T)
    wf = 1 - w1 - w0

    def log_f(n_: np.ndarray, c_: np.ndarray, a_: np.ndarray, b_: np.ndarray) -> np.ndarray:
        log_choose = gammaln(n_ + 1) - gammaln(c_ + 1) - gammaln(n_ - c_ + 1)
        return np.minimum(log_choose + betaln(c_ + a_, n_ - c_ + b_) - betaln(a_, b_), 0.0)

    ns = cells.ns[None, :]
    mid = cells.mid.tocoo()
    mid.sum_duplicates()
    mid_f = log_f(cells.pattern_n[mid.col], cells.pattern_c[mid.col], a[mid.row, 0], b[mid.row, 0])
    with np.errstate(divide="ignore"):
        ll = (
            xlogy(cells.all_pass, w1 + wf * np.exp(log_f(ns, ns, a, b))).sum(1)
            + xlogy(cells.all_fail, w0 + wf * np.exp(log_f(ns, 0 * ns, a, b))).sum(1)
            + xlogy(cells.flaky, wf[:, 0])
            + np.bincount(mid.row, mid.data * mid_f, minlength=cells.flaky.size)
        )
    per_n = np.unique(n, return_counts=True)[1]
    saturated = (
        xlogy(cells.all_pass, cells.all_pass).sum(1)
        + xlogy(cells.all_fail, cells.all_fail).sum(1)
        + np.bincount(mid.row, xlogy(mid.data, mid.data), minlength=cells.flaky.size)
        - xlogy(per_n, per_n).sum()
    )
    return 2.0 * (saturated - ll)


def pass_hat_interval(
    point: np.ndarray, reps: np.ndarray, ks: np.ndarray, ci: float
) -> tuple[np.ndarray, np.ndarray]:
    """The interval of the suite's pass^K from bootstrap fits ``reps`` (R, 4).

    The percentile interval of the refits, widened downwards to the basic-bootstrap bound
    2·point − upper when that is lower: the fit leans towards p = 1 (a task with p = 0.99 looks
    like an "always" task in a few trials), so the point forecast is biased upwards and a
    plain percentile interval under-covered in simulation. Never narrower than [point, point].
    """
    w1, w0, a, b = reps.T
    values = mixture_pass_hat(w1[:, None], (1 - w1 - w0)[:, None], a[:, None], b[:, None], ks[None, :])
    lo, hi = np.quantile(values, [(1 - ci) / 2, (1 + ci) / 2], axis=0)
    lo = np.clip(np.minimum(lo, 2 * point - hi), 0.0, None)
    return np.minimum(lo, point), np.maximum(hi, point)


def mixture_loglik(n: np.ndarray, c: np.ndarray, fit: Mixture) -> float:
    """Log-likelihood of tasks with c successes of n under the mixture.

    >>> round(mixture_loglik(np.array([2, 2]), np.array([2, 0]), Mixture(0.5, 0.5, 1.0, 1.0)), 12)  # 2 log ½
    -1.38629436112
    """
    n, c = np.asarray(n, np.int64), np.asarray(c, np.int64)
    log_choose = gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1)
    flaky = np.exp(log_choose + betaln(c + fit.alpha, n - c + fit.beta) - betaln(fit.alpha, fit.beta))
    dens = fit.share_always * (c == n) + fit.share_never * (c == 0) + fit.share_flaky * flaky
    with np.errstate(divide="ignore"):
        return float(np.log(dens).sum())


@dataclass(frozen=True)
class Readings:
    """Two readings of the tasks that never failed, and their Akaike-weighted average.

    n trials cannot tell a task with p = 1 from one with p = 0.99, yet pass^64 is 1 for the first
    and 0.53 for the second: ``with_always`` gives such tasks a share at p = 1, ``without_always``
    makes every task a Beta task that may fail. Both fit the counts about equally well, so the
    point is their average by Akaike weight (``weight``: of with_always) and the interval spans
    both models' intervals; one model alone missed truths the other describes.
    """

    with_always: Mixture
    without_always: Mixture
    weight: float

    @property
    def share_always(self) -> float:
        return self.weight * self.with_always.share_always

    @property
    def share_never(self) -> float:
        return (
            self.weight * self.with_always.share_never + (1 - self.weight) * self.without_always.share_never
        )

    def pass_hat(self, k: np.ndarray | int) -> np.ndarray:
        """The averaged suite pass^k."""
        return self.weight * self.with_always.pass_hat(k) + (1 - self.weight) * self.without_always.pass_hat(
            k
        )

    def task_pass_hat(self, n: np.ndarray, c: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Averaged posterior predictive pass^k per task, (tasks, len(k))."""
        with_always, without_always = (
            task_pass_hat(self.with_always, n, c, k),
            task_pass_hat(self.without_always, n, c, k),
        )
        return self.weight * with_always + (1 - self.weight) * without_always

    def intervals(
        self, n: np.ndarray, c: np.ndarray, ks: np.ndarray, ci: float, n_boot: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, dict[str, float], float]:
        """The pass^K interval spanning both models' parametric-bootstrap intervals (n_boot refits
        each), the shares' intervals likewise (the without-always model's share_always is 0),
        and the fit check's p-value: the share of the with-always bootstrap's suites whose
        :func:`deviance` from their own grid fit is at least the tasks' (small: the counts have a
        shape the mixture does not describe)."""
        los, his, shares = [], [], []
        fit_p = np.nan
        for fit, always in ((self.with_always, True), (self.without_always, False)):
            drawn = ReplicateCells.draw(fit, n, n_boot, rng)
            reps = fit_grid(drawn, always)
            if always:
                observed = deviance(n, c[None, :], fit_grid(ReplicateCells.of(n, c[None, :])))[0]
                fit_p = float(np.mean(_deviance(n, drawn, reps) >= observed - 1e-9))
            lo, hi = pass_hat_interval(fit.pass_hat(ks), reps, ks, ci)
            los.append(lo)
            his.append(hi)
            w1, w0 = reps[:, 0], reps[:, 1]
            shares.append(
                np.quantile(np.column_stack([w1, w0, 1 - w1 - w0]), [(1 - ci) / 2, (1 + ci) / 2], axis=0)
            )
        point = self.pass_hat(ks)
        lo, hi = np.minimum(np.minimum(*los), point), np.maximum(np.maximum(*his), point)
        q_lo, q_hi = np.minimum(*(s[0] for s in shares)), np.maximum(*(s[1] for s in shares))
        names = ("share_always", "share_never", "share_flaky")
        share_ci = {f"{name}_lo": float(v) for name, v in zip(names, q_lo, strict=True)}
        share_ci |= {f"{name}_hi": float(v) for name, v in zip(names, q_hi, strict=True)}
        return lo, hi, share_ci, fit_p


def fit_readings(n: np.ndarray, c: np.ndarray) -> Readings:
    """Fit both readings (:class:`Readings`) by maximum likelihood and weight them by AIC
    (4 parameters with the "always" share, 3 without).

    >>> r = fit_readings(np.full(30, 8), np.r_[np.full(15, 8), np.arange(8).repeat(2)[:15]])
    >>> r.without_always.share_always, bool(0 < r.weight < 1)
    (0.0, True)
    >>> bool(r.pass_hat(64) < r.with_always.pass_hat(64))  # the average lies between the readings
    True
    """
    n, c = np.asarray(n, np.int64), np.asarray(c, np.int64)
    with_always, without_always = fit_mixture(n, c), fit_mixture(n, c, always=False)
    aic_with = 8.0 - 2.0 * mixture_loglik(n, c, with_always)
    aic_without = 6.0 - 2.0 * mixture_loglik(n, c, without_always)
    weight = float(special.expit((aic_without - aic_with) / 2.0))
    return Readings(with_always, without_always, weight)


#: The p grid of the model-free bounds' linear programs.
_BOUND_GRID = np.linspace(0.0, 1.0, 401)


def data_bounds(n: np.ndarray, c: np.ndarray, ks: np.ndarray, ci: float) -> np.ndarray:
    """What the data allow without the mixture: the smallest and largest population pass^K
    over every distribution of p whose count frequencies fit the tasks' counts.

    The tasks' counts are brought to a common n0 = min n (each task's exact hypergeometric
    chance of each count in n0 of its trials) and every frequency gets a Clopper–Pearson
    interval, Bonferroni-corrected so all hold together at ``ci``; two linear programs per K
    then bound E[p^K] over distributions on a fine grid of p. When the true distribution
    fits inside the intervals (probability ≥ ci) the bounds contain its pass^K, whatever its
    shape. Returns (len(ks), 2): lower and upper bound per K.

    >>> b = data_bounds(np.full(20, 4), np.full(20, 4), np.array([4, 64]), 0.95)
    >>> bool(b[0, 0] > 0.7 and b[1, 0] < 0.05 and (b[:, 1] > 0.999).all())
    True
    """
    n, c = np.asarray(n, np.int64), np.asarray(c, np.int64)
    n0, tasks = int(n.min()), n.size
    counts = np.arange(n0 + 1)
    freq = sps.hypergeom.pmf(counts[None, :], n[:, None], c[:, None], n0).mean(0) * tasks
    level = 1 - (1 - ci) / (n0 + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo, hi = exact_binomial(freq, np.full_like(freq, tasks), (1 - level) / 2)
    pmf = sps.binom.pmf(counts[:, None], n0, _BOUND_GRID[None, :])
    a_ub, b_ub = np.vstack([pmf, -pmf]), np.r_[hi, -lo]
    a_eq, b_eq = np.ones((1, _BOUND_GRID.size)), np.array([1.0])
    out = np.full((ks.size, 2), np.nan)
    for i, k in enumerate(ks):
        moment = _BOUND_GRID ** float(k)
        for j, sign in enumerate((1.0, -1.0)):
            res = optimize.linprog(sign * moment, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, method="highs")
            if res.success:
                out[i, j] = float(np.clip(sign * res.fun, 0.0, 1.0))
    return out


def all_pass_floor(fits: Readings, n: np.ndarray, c: np.ndarray, ks: np.ndarray, ci: float) -> np.ndarray:
    """The forecast with every all-pass task's pass^K cut to q_L^K, q_L the lowest common p that
    their Σn trials without a failure allow (one-sided (1 − ci)/2: q_L^Σn = (1 − ci)/2).

    n trials cannot tell p = 1 from p = 0.98, and for K ≫ n the forecast hinges on which: both
    readings may put the all-pass tasks at (or next to) p = 1. For any p's of those tasks whose
    trials fit, their mean p^K is at least (geometric mean p)^K ≥ q_L^K, so the interval's lower
    end is widened down to this floor beyond n (benchmarks/forecast_validation.py: pass^64 of
    60 % of tasks at p = 0.98 was covered in 80 % of suites without it, 98–100 % with it).

    >>> n, c = np.full(20, 8), np.r_[np.full(12, 8), 7, 7, 1, np.zeros(5, int)]
    >>> fits = fit_readings(n, c)
    >>> floor = all_pass_floor(fits, n, c, np.array([64]), 0.95)
    >>> bool(floor[0] < 0.6 * 0.98**64 < fits.pass_hat(64))
    True
    """
    n, c = np.asarray(n, np.int64), np.asarray(c, np.int64)
    full = c == n
    if not full.any():
        return fits.pass_hat(ks)
    q_low = ((1 - ci) / 2) ** (1.0 / n[full].sum())
    excess = np.clip(fits.task_pass_hat(n[full], c[full], ks) - q_low ** ks[None, :].astype(float), 0.0, None)
    return fits.pass_hat(ks) - excess.sum(0) / n.size


# Identification -------------------------------------------------------------------------------


def unidentified(n: np.ndarray, c: np.ndarray) -> str | None:
    """Why a mixture cannot be fitted to these tasks, or None when it can."""
    n, c = np.asarray(n), np.asarray(c)
    if n.size < MIN_TASKS:
        return (
            f"only {n.size} tasks: the mixture needs at least {MIN_TASKS} (with fewer, its interval "
            "spans most of [0, 1] in simulation); add tasks, or read the observed pass^k for k ≤ n "
            "and the model-free bounds (bound_lo, bound_hi)"
        )
    flaky = int(((c > 0) & (c < n)).sum())
    if flaky < MIN_FLAKY:
        return (
            f"{flaky} task(s) with both a pass and a failure: the flaky part cannot be estimated "
            f"(at least {MIN_FLAKY} needed), so pass^k beyond n is unknown — a task that passed "
            "every trial may still fail at a rate too small to see in n trials; run more trials per task"
        )
    return None


# Public API -----------------------------------------------------------------------------------


@share_docs
def forecast(
    df: Counts | pd.DataFrame | str | os.PathLike[str],
    *,
    ks: Sequence[int] = KS,
    by: str | Sequence[str] | None = None,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
    per_task: bool = False,
) -> pd.DataFrame:
    """Forecast the suite's pass^K for K far beyond the trials run, with intervals.

    Fits, per group, the mixture "always" (p = 1) + "never" (p = 0) + Beta(α, β) to the
    tasks' counts by maximum likelihood, with and without the "always" share (see
    :class:`Readings`: the data cannot tell p = 1 from p = 0.99, and pass^K far out hangs on
    it), and returns one row per (group, K) with: ``pass^k`` the Akaike-weighted average of
    the two models' suite pass^K, shown up to :func:`point_horizon` (K ≤ n) and NaN beyond
    (biased there; ``note`` says so), ``lo``/``hi`` its ``ci`` interval at every K (spanning both
    models' parametric-bootstrap intervals; beyond n, ``lo`` is at most :func:`all_pass_floor`),
    ``observed`` the unbiased suite pass^k where every task has k ≤ n (NaN beyond),
    ``extrapolated`` (K beyond the smallest n), ``bound_lo``/``bound_hi``
    what the data allow at ``ci`` without any model (every distribution of p that fits the
    counts; see :func:`data_bounds` — for K ≫ n the lower bound is near 0), the averaged shares
    ``share_always`` (the asymptote as K grows), ``share_never``, ``share_flaky``, each with
    ``_lo``/``_hi``, the with-always model's Beta ``alpha`` and ``beta``, each model's own
    forecast ``pass^k_with_always`` and ``pass^k_without_always`` and the Akaike weight
    ``weight_with_always`` (for diagnosis, at every K: each reading is as biased as the point far
    out), ``n_tasks``, ``min_n``, ``given`` (False when the forecast is declined: read
    ``bound_lo``/``bound_hi`` instead) and ``note`` (why it was declined, or why the point is not
    shown, else empty). Declines (NaN, ``given`` False and a warning) with fewer than 10 tasks or fewer
    than 2 flaky tasks (0 < c < n), and for K beyond n when the fit check flags the counts
    (p < :data:`FIT_LEVEL`; needs ``n_boot`` > 0).

    With ``per_task=True``: one row per (group, task, K) with the task's posterior
    predictive pass^K given its c of n (``pass^k``, averaged over the two models like the
    suite's; NaN beyond :func:`point_horizon` of the task's n, with a ``note``: their mean is
    the suite's point) beside its unbiased ``observed`` value.

    {df_or_folder}
    ks: the K values (default 1, 2, 4, …, 128); any K ≥ 1, also beyond n.
    {by}
    {ci}
    {n_boot}
    {seed}
    {infra}

    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(1)
    >>> p = np.r_[np.ones(10), rng.beta(3, 1, 20)]
    >>> passed = rng.random((30, 4)) < p[:, None]
    >>> df = pd.DataFrame({"task": np.repeat(np.arange(30), 4), "passed": passed.ravel()})
    >>> df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    >>> out = forecast(df, ks=(4, 8, 64), by=(), n_boot=200)
    >>> out[["k", "extrapolated"]].values.tolist()
    [[4, False], [8, True], [64, True]]
    >>> bool(out["lo"].iloc[0] <= out["pass^k"].iloc[0] <= out["hi"].iloc[0])  # K ≤ n: shown
    True
    >>> bool(out["given"].all() and (out["lo"] <= out["pass^k_without_always"]).all())
    True
    >>> bool(out["pass^k"].iloc[1:].isna().all() and (out["lo"] < out["hi"]).all())  # K > n
    True
    >>> out["note"].iloc[1][:28]
    'point not shown beyond K = 4'
    """
    ks_ = _check_ks(ks)
    check_options(ci=ci, n_boot=n_boot, seed=seed)
    counted = as_counts(df, by=by, infra=infra, outcomes=per_task)
    by_ = counted.by
    table = counted.table[counted.table["n"] > 0].reset_index(drop=True)
    if table.empty:
        raise ValueError("no usable trials: every trial is an infra_error; rerun them, or pass infra='fail'")
    gid, keys = group_ids(table, by_)
    keys = counted.restore(keys)
    rng = np.random.default_rng(seed)
    frames = []
    for g in range(len(keys)):
        rows = table[gid == g]
        n, c = rows["n"].to_numpy(), rows["c"].to_numpy()
        reason = unidentified(n, c)
        group = {col: keys.iloc[g][col] for col in by_}
        if reason is not None:
            label = ", ".join(f"{k}={v}" for k, v in group.items()) or "all trials"
            warnings.warn(f"forecast declined for {label}: {reason}", UserWarning, stacklevel=2)
        fits = fit_readings(n, c) if reason is None else None
        if per_task:
            frames.append(_per_task(rows, fits, ks_, reason))
        else:
            frame = _suite(n, c, fits, ks_, ci, n_boot, rng, reason)
            frames.append(frame.assign(**group)[[*by_, *frame.columns]])
    out = pd.concat(frames, ignore_index=True)
    return described(
        out, "forecast", by=(*by_, "task") if per_task else by_, k=ks_.tolist(), ci=ci, infra=infra
    )


def _suite(
    n: np.ndarray,
    c: np.ndarray,
    fits: Readings | None,
    ks: np.ndarray,
    ci: float,
    n_boot: int,
    rng: np.random.Generator,
    reason: str | None,
) -> pd.DataFrame:
    min_n = int(n.min())
    observed = np.array([float(np.mean(pass_hat_k(n, c, k))) if k <= min_n else np.nan for k in ks])
    nan = np.full(ks.size, np.nan)
    point, lo, hi, with_always, without_always = nan.copy(), nan.copy(), nan.copy(), nan.copy(), nan.copy()
    weight, alpha, beta = np.nan, np.nan, np.nan
    # Declined: the observed shares of all-pass and all-fail tasks (all-pass data: share_always = 1).
    shares = {"share_always": float(np.mean(c == n)), "share_never": float(np.mean(c == 0))}
    share_ci: dict[str, float] = {}
    declined = np.full(ks.size, fits is None)
    if fits is not None:
        point, weight = fits.pass_hat(ks), fits.weight
        with_always, without_always = fits.with_always.pass_hat(ks), fits.without_always.pass_hat(ks)
        alpha, beta = fits.with_always.alpha, fits.with_always.beta
        shares = {"share_always": fits.share_always, "share_never": fits.share_never}
        if n_boot > 0:
            lo, hi, share_ci, fit_p = fits.intervals(n, c, ks, ci, n_boot, rng)
            lo = np.where(ks > min_n, np.minimum(lo, all_pass_floor(fits, n, c, ks, ci)), lo)
            if fit_p < FIT_LEVEL:
                reason = (
                    f"the counts have a shape the mixture does not describe (fit check p = {fit_p:.2f} "
                    f"< {FIT_LEVEL}; common when many tasks are nearly but not quite certain), so "
                    f"pass^k beyond n = {min_n} is declined: read bound_lo/bound_hi there"
                )
                declined = ks > min_n
                for values in (point, lo, hi, with_always, without_always):
                    values[declined] = np.nan
                warnings.warn(f"forecast declined beyond n: {reason}", UserWarning, stacklevel=3)
    notes = np.full(ks.size, reason or "", dtype=object)
    hidden = (ks > point_horizon(min_n)) & ~declined
    point[hidden] = np.nan
    notes[hidden] = hidden_note(min_n)
    shares["share_flaky"] = 1.0 - shares["share_always"] - shares["share_never"]
    bounds = data_bounds(n, c, ks, ci) if n.size >= 2 else np.full((ks.size, 2), np.nan)
    out = pd.DataFrame(
        {
            "k": ks,
            "pass^k": point,
            "lo": lo,
            "hi": hi,
            "observed": observed,
            "extrapolated": ks > min_n,
            "bound_lo": bounds[:, 0],
            "bound_hi": bounds[:, 1],
        }
    )
    for name, value in shares.items():
        out[name] = value
        out[name + "_lo"] = share_ci.get(name + "_lo", np.nan)
        out[name + "_hi"] = share_ci.get(name + "_hi", np.nan)
    out["alpha"], out["beta"] = alpha, beta
    out["pass^k_with_always"], out["pass^k_without_always"] = with_always, without_always
    out["weight_with_always"] = weight
    out["n_tasks"] = n.size
    out["min_n"] = min_n
    out["given"] = ~declined
    out["note"] = notes
    return out


def task_pass_hat(fit: Mixture, n: np.ndarray, c: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Posterior predictive E[p^k | c of n] per task under the mixture, broadcast over k.

    >>> fit = Mixture(0.0, 0.0, 1.0, 1.0)  # uniform p: posterior Beta(1 + c, 1 + n - c)
    >>> round(float(task_pass_hat(fit, np.array([2]), np.array([2]), np.array([1]))[0, 0]), 12)  # (1+2)/(2+2)
    0.75
    """
    n, c, k = np.asarray(n)[:, None], np.asarray(c)[:, None], np.asarray(k)[None, :]
    log_f = gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1) + betaln(c + fit.alpha, n - c + fit.beta)
    f = np.exp(log_f - betaln(fit.alpha, fit.beta))
    a_w = fit.share_always * (c == n)
    n_w = fit.share_never * (c == 0)
    f_w = fit.share_flaky * f
    post_flaky = beta_moment(fit.alpha + c, fit.beta + n - c, k)
    return (a_w + f_w * post_flaky) / (a_w + n_w + f_w)


def _per_task(rows: pd.DataFrame, fits: Readings | None, ks: np.ndarray, reason: str | None) -> pd.DataFrame:
    n, c = rows["n"].to_numpy(), rows["c"].to_numpy()
    notes = np.full((n.size, ks.size), reason or "", dtype=object)
    if fits is not None:
        values = fits.task_pass_hat(n, c, ks)
        for size in np.unique(n):
            hidden = (n[:, None] == size) & (ks[None, :] > point_horizon(size))
            values[hidden] = np.nan
            notes[hidden] = hidden_note(size)
    else:
        values = np.full((n.size, ks.size), np.nan)
    observed = np.where(
        ks[None, :] <= n[:, None],
        pass_hat_k(n[:, None], c[:, None], np.minimum(ks[None, :], n[:, None])),
        np.nan,
    )
    base = rows.drop(columns=["n_infra", *round_columns(rows)]).reset_index(drop=True)
    out = base.loc[base.index.repeat(ks.size)].reset_index(drop=True)
    out["k"] = np.tile(ks, n.size)
    out["pass^k"] = values.ravel()
    out["observed"] = observed.ravel()
    out["note"] = notes.ravel()
    return out


def _check_ks(ks: Sequence[int]) -> np.ndarray:
    values = list(ks) if not isinstance(ks, int | np.integer) else [ks]
    if not values:
        raise ValueError("ks must list at least one K, e.g. ks=(1, 4, 16, 64)")
    for k in values:
        check_k(k)
    return np.array(sorted(set(int(k) for k in values)), dtype=np.int64)
